/* list.h - the intrusive list: glibc's BSD <sys/queue.h>, the one every module links with.
 *
 * An object that sits on a list embeds the link (`LIST_ENTRY(type) link;`); the list is a head
 * (`LIST_HEAD(, type) items;`). Nothing is allocated: inserting and removing only rewrites
 * pointers, so neither can fail, and an object is on as many lists as it has links. Pick the
 * smallest kind that does the job:
 *
 *   SLIST   singly linked, head only: a stack (push and pop at the head)
 *   LIST    doubly linked, head only: O(1) removal of any element, newest first
 *   STAILQ  singly linked, head and tail: a FIFO (insert at the tail, take from the head)
 *   TAILQ   doubly linked, head and tail: a FIFO with O(1) removal of any element
 *
 * Zeroed memory is not an empty STAILQ or TAILQ (their heads point at themselves): *_INIT them,
 * and *_INIT them again after a head is copied or moved. A zeroed SLIST or LIST head is empty.
 * A removed element's link is left as it was, not cleared.
 *
 * glibc's header lacks the *_FOREACH_SAFE forms that the BSDs have; they are defined here, with
 * the BSD meaning: `tvar` holds the next element before the body runs, so the body may remove
 * (and free) `var`, but must not remove the element after it.
 *
 * Threads: none; a list is guarded by whatever guards the object that holds its head.
 */
#ifndef TLC_LIST_H
#define TLC_LIST_H

#include <sys/queue.h>

#ifndef SLIST_FOREACH_SAFE
#define SLIST_FOREACH_SAFE(var, head, field, tvar)                                                 \
  for ((var) = SLIST_FIRST(head); (var) != NULL && ((tvar) = SLIST_NEXT(var, field), 1);           \
       (var) = (tvar))
#endif

#ifndef LIST_FOREACH_SAFE
#define LIST_FOREACH_SAFE(var, head, field, tvar)                                                  \
  for ((var) = LIST_FIRST(head); (var) != NULL && ((tvar) = LIST_NEXT(var, field), 1);             \
       (var) = (tvar))
#endif

#ifndef STAILQ_FOREACH_SAFE
#define STAILQ_FOREACH_SAFE(var, head, field, tvar)                                                \
  for ((var) = STAILQ_FIRST(head); (var) != NULL && ((tvar) = STAILQ_NEXT(var, field), 1);         \
       (var) = (tvar))
#endif

#ifndef TAILQ_FOREACH_SAFE
#define TAILQ_FOREACH_SAFE(var, head, field, tvar)                                                 \
  for ((var) = TAILQ_FIRST(head); (var) != NULL && ((tvar) = TAILQ_NEXT(var, field), 1);           \
       (var) = (tvar))
#endif

#endif
