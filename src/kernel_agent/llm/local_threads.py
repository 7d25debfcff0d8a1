"""How many threads llama.cpp uses, chosen by measured speed while the server works.

On a quiet 2-core machine two threads generate ~1.7x faster than one; on a machine
busy with other work two threads that wait on each other at every step lose badly
(measured 1.2 against 6.5-8.5 tokens/s at load average 7 on 2 cores). No fixed count
is right for both, so the local server measures: :class:`ThreadTuner` keeps a moving
average of the seconds per generated token for each candidate count, uses the
fastest, and every ``explore_every`` tokens (more if the others are much slower: the
tries cost about a twentieth at most) tries the others for ``probe`` tokens, so that a
change of load is noticed. Prompt evaluation uses the count that generation
found fastest. ``KERNEL_AGENT_LOCAL_THREADS=N`` pins the count instead.

:func:`install` wraps one ``llama_cpp.Llama``'s ``eval`` with it (the server's
generation calls ``eval`` once per token).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["ThreadTuner", "candidates", "install"]


def candidates(cores: int) -> list[int]:
    """The counts worth trying on ``cores`` cores: all of them, half, and one."""
    return sorted({max(1, cores), max(1, cores // 2), 1})


class ThreadTuner:
    """Picks a thread count per generated token from measured seconds per token. Pure."""

    def __init__(
        self, choices: Sequence[int], explore_every: int = 48, probe: int = 2, alpha: float = 0.3
    ) -> None:
        if not choices:
            raise ValueError("no thread counts to choose from")
        self.choices = sorted(set(choices), reverse=True)  # the most threads first
        self.explore_every = explore_every
        self.probe = probe
        self.alpha = alpha
        #: moving average of seconds per token, per thread count (absent: not measured)
        self.cost: dict[int, float] = {}
        self._since_explore = 0
        self._probing: list[int] = []  # counts still to try, then back to the best
        self._left = 0  # tokens left for the count being tried

    @property
    def best(self) -> int:
        """The fastest count measured so far (the most threads before any measure)."""
        measured = [n for n in self.choices if n in self.cost]
        if not measured:
            return self.choices[0]
        return min(measured, key=lambda n: self.cost[n])

    def pick(self) -> int:
        """The count for the next generated token."""
        if self._left <= 0 and self._probing:
            self._probing.pop(0)
            self._left = self.probe
        if self._probing:
            return self._probing[0]
        unmeasured = [n for n in self.choices if n not in self.cost]
        if unmeasured:  # try each once before choosing
            self._probing, self._left = [unmeasured[0]], self.probe
            return unmeasured[0]
        if self._since_explore >= self._interval() and len(self.choices) > 1:
            self._since_explore = 0
            others = [n for n in self.choices if n != self.best]
            self._probing, self._left = others[:1], self.probe
            return others[0]
        return self.best

    def _interval(self) -> int:
        """Tokens between tries: ``explore_every``, or more when the others are so slow
        that trying them would cost over a twentieth of the time."""
        best = self.cost[self.best]
        worst = max(self.cost.values())
        if best <= 0:
            return self.explore_every
        return max(self.explore_every, int(20 * self.probe * worst / best))

    def record(self, threads: int, seconds: float) -> None:
        """One generated token took ``seconds`` with ``threads`` threads."""
        old = self.cost.get(threads)
        self.cost[threads] = seconds if old is None else old + self.alpha * (seconds - old)
        self._since_explore += 1
        if self._probing and self._probing[0] == threads:
            self._left -= 1
            if self._left <= 0:
                self._probing.pop(0)
                self._left = self.probe if self._probing else 0


def install(
    llama: Any,
    tuner: ThreadTuner,
    set_threads: Callable[[Any, int, int], None] | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> None:
    """Wrap ``llama.eval``: each call runs with the tuner's count (generation and prompt
    alike), and the time of each one-token call is recorded."""
    if set_threads is None:
        import llama_cpp

        def set_threads(llm: Any, n: int, n_batch: int) -> None:
            llama_cpp.llama_set_n_threads(llm._ctx.ctx, n, n_batch)

    inner = llama.eval
    lock = threading.Lock()
    current = [0]

    def timed_eval(tokens: Sequence[int]) -> Any:
        with lock:
            n = tuner.pick() if len(tokens) == 1 else tuner.best
            if n != current[0]:
                set_threads(llama, n, n)
                current[0] = n
            start = clock()
            result = inner(tokens)
            if len(tokens) == 1:
                tuner.record(n, clock() - start)
        return result

    llama.eval = timed_eval
