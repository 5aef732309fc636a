"""Step a TRL trainer from another thread: the trainer's ``train()`` runs in a :class:`TrainerThread` thread and parks
where it needs its driver (HOTE's solver and proposer: the next step's rows, the held generation), so a driver
can interleave two trainers one step at a time, exactly one of them running at any moment.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any


class _Stop(Exception):
    """Raised inside a parked trainer thread to end its ``train()`` when the driver is done."""


class TrainerThread:
    """A trainer's ``train()`` in a thread. The trainer calls :meth:`request` where it needs the driver (its
    next step's rows, its rewards) and blocks there; the driver answers with :meth:`send` and waits on
    :meth:`wait`, so the two never run at once."""

    def __init__(self, name: str):
        self.name = name
        self._events: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._answers: queue.Queue[Any] = queue.Queue()
        self._thread: threading.Thread | None = None

    def start(self, train: Callable[[], Any]) -> None:
        def main() -> None:
            try:
                train()
            except _Stop:
                return
            except BaseException as exc:  # noqa: BLE001 - handed to the driver, which re-raises it
                self._events.put(("error", exc))
                return
            self._events.put(("finished", None))

        self._thread = threading.Thread(target=main, name=f"trainer-{self.name}", daemon=True)
        self._thread.start()

    def request(self, kind: str, payload: Any = None) -> Any:  # trainer thread
        self._events.put((kind, payload))
        answer = self._answers.get()
        if answer is _Stop:
            raise _Stop
        return answer

    def wait(self, *kinds: str) -> tuple[str, Any]:  # driver
        kind, payload = self._events.get()
        if kind == "error":
            raise payload
        if kind not in kinds:
            raise RuntimeError(f"the {self.name} trainer said '{kind}', expected {' or '.join(kinds)}")
        return kind, payload

    def send(self, answer: Any) -> None:
        self._answers.put(answer)

    def stop(self) -> None:
        if self._thread is not None and self._thread.is_alive():
            self._answers.put(_Stop)
            self._thread.join()
