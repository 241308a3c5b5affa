# Small helpers shared by every CMakeLists.txt of tlcap (in the manner of nng's NNGHelpers).

# The warning set, applied PRIVATE to every target of ours.
set(TLC_WARNINGS -Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
                 -Wformat=2 -Wundef -Wpointer-arith)
function(tlc_warnings target)
  target_compile_options(${target} PRIVATE ${TLC_WARNINGS})
  if(TLC_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# tlc_require_pkg(PREFIX module debian-package): pkg-config lookup with an install hint.
macro(tlc_require_pkg prefix module debpkg)
  pkg_check_modules(${prefix} IMPORTED_TARGET ${module})
  if(NOT ${prefix}_FOUND)
    message(FATAL_ERROR "${module} not found via pkg-config: apt-get install ${debpkg}")
  endif()
endmacro()

# tlc_add_test(name SOURCES a.c b.c LIBS x y [LABELS l] [TIMEOUT s])
# A cmocka test executable registered with CTest.
function(tlc_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} tlc_testsupport PkgConfig::CMOCKA)
  tlc_warnings(${name})
  add_test(NAME ${name} COMMAND ${name})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "unit;${T_LABELS}")
endfunction()

# tlc_add_fuzzer(name SOURCES harness.c LIBS x y)
# With TLC_FUZZ: a libFuzzer binary, and a CTest case that runs it for TLC_FUZZ_SECONDS on a
# scratch copy of the committed corpus tests/fuzz/corpus/<name>. Without TLC_FUZZ: the same
# harness linked with a small driver that replays every corpus file once (a regression test
# in every build).
function(tlc_add_fuzzer name)
  cmake_parse_arguments(F "" "" "SOURCES;LIBS" ${ARGN})
  set(corpus ${PROJECT_SOURCE_DIR}/tests/fuzz/corpus/${name})
  if(TLC_FUZZ)
    add_executable(fuzz_${name} ${F_SOURCES})
    target_link_libraries(fuzz_${name} PRIVATE ${F_LIBS})
    target_link_options(fuzz_${name} PRIVATE -fsanitize=fuzzer)
    tlc_warnings(fuzz_${name})
    add_test(NAME fuzz_${name}
             COMMAND ${PROJECT_SOURCE_DIR}/tests/fuzz/run-fuzzer $<TARGET_FILE:fuzz_${name}>
                     ${corpus} ${TLC_FUZZ_SECONDS})
    set_tests_properties(fuzz_${name} PROPERTIES TIMEOUT 900 LABELS fuzz)
  else()
    add_executable(fuzzreplay_${name} ${F_SOURCES} ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.c)
    target_link_libraries(fuzzreplay_${name} PRIVATE ${F_LIBS})
    tlc_warnings(fuzzreplay_${name})
    add_test(NAME fuzzreplay_${name} COMMAND fuzzreplay_${name} ${corpus})
    set_tests_properties(fuzzreplay_${name} PROPERTIES TIMEOUT 300 LABELS fuzzreplay)
  endif()
endfunction()

# tlc_module(target prefix [dir]): the layering rule of the build (docs/architecture.md).
# Headers are included by path, "prefix/file.h" (prefix may be nested: "store/seg"), and that
# path resolves only for `target` and the targets that link it: the build tree gets inc/<target>/<prefix> -> dir (default: the
# current source directory), and only that directory is put on `target`'s (PUBLIC) include path.
# A library that does not link `target` - one in a lower layer - cannot include its headers.
function(tlc_module target prefix)
  set(dir ${CMAKE_CURRENT_SOURCE_DIR})
  if(ARGC GREATER 2)
    set(dir ${ARGV2})
  endif()
  set(stage ${PROJECT_BINARY_DIR}/inc/${target})
  # a nested prefix ("store/seg") links its last component inside the folders before it
  get_filename_component(parent ${stage}/${prefix} DIRECTORY)
  file(MAKE_DIRECTORY ${parent})
  if(NOT EXISTS ${stage}/${prefix})
    file(CREATE_LINK ${dir} ${stage}/${prefix} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${stage})
endfunction()
