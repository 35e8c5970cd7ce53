"""Worker processes for one run: started only when a batch repays them, stopped by the parent,
never outliving it.

A worker ignores SIGINT (Ctrl-C reaches the whole process group; the parent, which handles it,
shuts the pool down), and the parent takes SIGTERM as an interrupt while its workers run, so
that shutting the pool down joins them instead of leaving them behind, reparented to init.
"""

from __future__ import annotations

import _signal
import contextlib
import functools
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import TYPE_CHECKING

from .signals import terminate_as_interrupt

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future
    from typing import Any

# Fewer files than this are parsed in this process: starting workers would cost more.
_PARALLEL_MIN_FILES = 24
_STREAMED_CHUNK = 2  # items handed out together when they come one by one


def worker_started(parent: int) -> None:
    """In each worker process, first thing. On Linux the system also stops the worker when its
    parent dies, even by SIGKILL, which no handler sees."""
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    if sys.platform.startswith("linux"):
        import ctypes

        with contextlib.suppress(OSError, AttributeError):
            pr_set_pdeathsig = 1
            ctypes.CDLL(None).prctl(pr_set_pdeathsig, _signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before that took effect
            os._exit(1)


def _may_fork() -> bool:
    """May this process fork workers: not a daemonic worker itself (flake8's), on a system that
    forks, with no other thread running (a fork beside one can deadlock)?"""
    import multiprocessing  # only now: it costs a warm run more than the rest of its imports

    return (
        not multiprocessing.current_process().daemon
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


def _received(receiving: Any) -> tuple[bool, Any]:
    """A forked child's outcome: whether its task was done, and its result."""
    with contextlib.suppress(EOFError):  # it died (killed, out of memory)
        return receiving.recv()
    return False, None


class Workers:
    """The worker processes of one run, started for the first batch large enough to repay them,
    and only where this process may fork: not in flake8's daemonic workers, and not beside other
    threads (a test suite calling `assert_no_self_calls`), which a fork can deadlock. Once
    started, every batch of two or more items is shared out."""

    def __init__(self, jobs: int, min_batch: int = _PARALLEL_MIN_FILES):
        """`min_batch`: the fewest items worth starting workers for (fewer files than 24 to parse;
        two files to rewrite, each costing many times a worker's start)."""
        self.jobs = jobs or os.cpu_count() or 1
        self.min_batch = min_batch
        self._pool: Executor | None = None
        self._size = 0
        self._restore_sigterm: Callable[[], None] = lambda: None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def for_batch(self, batch: int) -> Executor | None:
        """The pool, if a batch of this size is worth sharing out (started on first need)."""
        if self._pool is not None:
            return self._pool if batch >= 2 else None
        if self.jobs < 2 or batch < self.min_batch or not _may_fork():
            return None
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        self._size = min(self.jobs, max(1, batch // (self.min_batch // 2)))
        self._pool = ProcessPoolExecutor(
            self._size,
            mp_context=multiprocessing.get_context("fork"),
            initializer=worker_started,
            initargs=(os.getpid(),),
        )
        self._restore_sigterm = terminate_as_interrupt()
        return self._pool

    def map(self, job: Callable[[Any], Any], items: Iterable[Any], chunksize: int = 0) -> Iterator[Any]:
        """`job` of each item, in order: in the workers when the batch repays them. Items that
        come one by one (an iterator, not a collection) go to running workers as they come, while
        the caller is still producing the rest. `chunksize`: items handed out together (0: a
        quarter of each worker's share; 1 for items that each cost far more than handing out)."""
        if self._pool is not None and not isinstance(items, Sized):
            return iter(list(self._pool.map(job, items, chunksize=_STREAMED_CHUNK)))
        items = list(items)
        pool = self.for_batch(len(items))
        if pool is None:
            return map(job, items)
        return iter(list(pool.map(job, items, chunksize=chunksize or max(1, len(items) // (self._size * 4)))))

    def submit(self, batch: int, job: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """`job(*args)` for a batch of this size: started now in a worker when that pays, else run
        by the caller when it asks for the result."""
        pool = self.for_batch(batch)
        pending: Future | None = pool.submit(job, *args) if pool else None
        return pending.result if pending else lambda: job(*args)

    def share(
        self,
        items: Sequence[Any],
        here: Callable[[Callable[[], Any]], Any],
        forked: Callable[[Callable[[], Any]], Any],
    ) -> list[Any]:
        """`here(take)` run in this process and `forked(take)` in a process forked now for each
        other core (as many as have half a batch's worth of items each, see `min_batch`), which
        finds in its memory all this process holds (only results travel back); `take()` gives the
        next of `items` that no process took yet (None once all are taken), so each process does as
        much as it can. The pool is stopped first (a fork beside its threads
        can deadlock). The results of the processes that finished, this one's first: a child that
        failed leaves its items undone, for the caller to do. Without forking (one job, a fork that
        may not be made), `here` does all."""
        self.close()
        count = min(self.jobs, len(items) // (self.min_batch // 2))  # processes, each worth its fork
        if count < 2 or not _may_fork():
            return [here(functools.partial(next, iter(items), None))]
        import multiprocessing

        context = multiprocessing.get_context("fork")
        taken = context.Value("q", 0)

        def take() -> Any:
            with taken.get_lock():
                place = taken.value
                taken.value = place + 1
            return items[place] if place < len(items) else None

        children = []
        try:
            for _ in range(count - 1):
                children.append(self._fork(forked, take))
            results = [here(take)]
            for child, receiving in children:
                done, result = _received(receiving)
                if done:
                    results.append(result)
                child.join()
            return results
        finally:
            for child, receiving in children:
                receiving.close()
                if child.exitcode is None:  # interrupted here, or the task here failed
                    child.kill()
                    child.join()

    def background(self, job: Callable[..., Any], *args: Any) -> Callable[[], Any]:
        """`job(*args)` in a process forked now, beside what this one does next (`fix`'s search for
        tests while it loads libcst, which leaves the other core idle); the function returned gives
        its result. Without forking (one job, a pool running, a fork that may not be made), or
        when the child fails, the job runs in this process when its result is asked for."""
        if self.jobs < 2 or self._pool is not None or not _may_fork():
            return functools.partial(job, *args)
        child, receiving = self._fork(lambda _: job(*args), None)

        def result() -> Any:
            try:
                done, value = _received(receiving)
            finally:
                receiving.close()
                child.join()
            return value if done else job(*args)

        return result

    def _fork(self, task: Callable[[Any], Any], take: Any) -> tuple[Any, Any]:
        """A child forked now that runs `task(take)` (see `_child`), and the end of the pipe its
        outcome comes back through."""
        import multiprocessing

        context = multiprocessing.get_context("fork")
        receiving, sending = context.Pipe(duplex=False)
        child = context.Process(target=self._child, args=(task, take, sending, os.getpid()), daemon=True)
        child.start()
        sending.close()
        return child, receiving

    def _child(
        self, task: Callable[[Callable[[], Any]], Any], take: Callable[[], Any], sending: Any, parent: int
    ) -> None:
        """A forked child's life: the task, with no pool of its own (its parent's is not its), its
        result sent back, or its failure."""
        worker_started(parent)
        self._pool, self.jobs = None, 1
        try:
            outcome = (True, task(take))
        except BaseException:  # whatever it was, the parent does what it took
            outcome = (False, None)
        with contextlib.suppress(BaseException):  # a result that cannot be sent: the same
            sending.send(outcome)
        sending.close()

    def close(self) -> None:
        """Stop the workers (pending work is cancelled) and put SIGTERM back."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
            self._restore_sigterm()
