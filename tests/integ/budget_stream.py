"""The hand-worked stream and budgets of the budget tests (test_budget_gate, test_budget_live,
test_violations_serve, test_violation_location): one stream, its samples worked out by hand,
and budget sections that each test puts together (budgets()).

The stream of test_replay.py, on two cores (record number = engine sequence, from 1):
  1 main E@100 c0, 2 f E@120 c1, 3 main S@150 c0, 4 f E@150 c0, 5 f X@170 c1,
  6 var W 5 @200, 7 f X@250 c0, 8 main R@250 c0, 9 var W 7 @300, 10 main X@400 c0
Samples: core0 main NET 200 (100..150, 250..400), CALL 300 (100..400); core0 f NET = CALL 100
(150..250); core1 f NET = CALL 50 (120..170); variable 20000000 PERIOD 100 (200..300)."""
import tlctest as T

# handle, type (0 X, 1 S, 2 R, 3 E, 4 W), core, data, time
REC = [
    (0x00000000, 3, 0, 0, 100),
    (0x00000001, 3, 1, 0, 120),
    (0x00000000, 1, 0, 0, 150),
    (0x00000001, 3, 0, 0, 150),
    (0x00000001, 0, 1, 0, 170),
    (0x20000000, 4, 0, 5, 200),
    (0x00000001, 0, 0, 0, 250),
    (0x00000000, 2, 0, 0, 250),
    (0x20000000, 4, 0, 7, 300),
    (0x00000000, 0, 0, 0, 400),
]


def data(recs=REC, shift=0):
    """The records as bin11 bytes, their times moved by `shift`."""
    return b"".join(T.bin11(h, t, c, v, tm + shift) for (h, t, c, v, tm) in recs)


# Each budget and what it finds in the stream:
SECTIONS = {
    # core0 f NET 100 > 60 (150..250); core1's 50 is within
    "f_net": "area = 00000001\nstat = net\nmax = 60ns\n",
    # CALL 300 > 250 (100..400)
    "main_call": "area = 0x00000000\nstat = call\nmax = 250ns\n",
    # the same with a minimum the 300 keeps
    "main_call_min": "area = 0x00000000\nstat = call\nmax = 250ns\nmin = 10ns\n",
    # PERIOD 100 < 150 (200..300)
    "var_period": "area = 20000000\nstat = period\nmin = 0.15us\n",
    # core1 f NET 50 > 40 (120..170)
    "f_core1": "area = 00000001\ncontext = core1\nstat = net\nmax = 40ns\n",
    # nothing
    "fine": "area = 0000000?\nstat = gross\nmax = 1ms\n",
}


def budgets(*names):
    """A budgets file of the named SECTIONS ("main_call_min" is written as [budget main_call])."""
    return "".join("[budget %s]\n%s\n" % (n.replace("_min", ""), SECTIONS[n]) for n in names)
