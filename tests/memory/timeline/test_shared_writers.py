"""Several processes writing one memory, one of them flushing while the others write: every process's
projection equals `rebuild()` (the flush point is stored at the head first and every process closes its
open episodes there)."""

import multiprocessing
import queue
import traceback
from datetime import timedelta
from unittest import mock

from memory import EpisodicMemory
from memory.timeline import HashingEncoder, RecordKind, open_store
from tests.builders import T0


def _writer(target, index, cycles, flush_at, barrier, results):
    """Cycles of observe → decide → outcome, flushing after the cycles in `flush_at`; then compare with rebuild().
    A failure is sent back as text, so the test's message says what went wrong in which process."""
    try:
        _write_and_compare(target, index, cycles, flush_at, barrier, results)
    except BaseException as error:  # noqa: BLE001 — reported to the parent, which fails the test with it
        barrier.abort()  # the others stop waiting for this process
        results.put((index, f"{type(error).__name__}: {error}\n{traceback.format_exc()}", -1))
        raise


def _write_and_compare(target, index, cycles, flush_at, barrier, results):
    with EpisodicMemory(target, principal=f"agent-{index}", encoder=HashingEncoder(dim=64)) as memory:
        clock = T0
        for cycle in range(cycles):
            clock += timedelta(minutes=10)
            memory.observe(f"service {cycle % 3}: latency high", timestamp=clock, situation="incident")
            memory.decide(
                f"Decision: check the pool ({cycle})",
                choice="pool",
                timestamp=clock + timedelta(minutes=1),
                situation="incident",
            )
            memory.outcome(
                "still failing", status="failure", timestamp=clock + timedelta(minutes=2), situation="incident"
            )
            if cycle in flush_at:
                memory.flush()
        barrier.wait(timeout=120)
        memory.recall()  # picks up what the others appended after this process's last entry
        projection = memory.projection()
        results.put((index, projection == memory.rebuild(), len(projection.episodes)))


def run_writers(target, *, processes=3, cycles=8, flushes=({2, 5}, {4}, set())):
    """Run the writer processes on one store; (index, projection equals rebuild, episodes) of each, sorted."""
    with open_store(target):
        pass  # created once, before the writers start
    context = multiprocessing.get_context("fork")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [
        context.Process(
            target=_writer, args=(target, i, cycles, flushes[i % len(flushes)], barrier, results), daemon=True
        )
        for i in range(processes)
    ]
    for worker in workers:
        worker.start()
    try:
        outcomes = []
        for _ in workers:
            try:
                outcomes.append(results.get(timeout=120))
            except queue.Empty:
                raise AssertionError(
                    f"a writer sent nothing in 120 s: got {outcomes}, exit codes "
                    f"{[worker.exitcode for worker in workers]}"
                ) from None
        return sorted(outcomes, key=lambda outcome: outcome[0])
    finally:
        barrier.abort()  # a worker that failed leaves the others waiting
        for worker in workers:
            worker.join(timeout=30)


def check_writers(target):
    outcomes = run_writers(target)
    assert [equal for _, equal, _ in outcomes] == [True] * len(outcomes), outcomes
    assert len({count for _, _, count in outcomes}) == 1, outcomes
    with open_store(target, create=False) as store:
        assert len(store) == 3 * 8 * 3 and store.verify() is None
        assert len(list(store.records(RecordKind.FLUSH))) >= 2


def test_a_flush_while_others_write_keeps_every_projection_equal_to_rebuild(tmp_path):
    check_writers(str(tmp_path / "shared.sqlite"))


def check_open_between_a_flush_point_and_its_episodes(target):
    """One process stores a flush point; before it stores the episodes that point closes, another process
    opens the store. The second process must close those episodes at the point, as `rebuild()` does."""
    with EpisodicMemory(target, principal="a", encoder=HashingEncoder(dim=64)) as writer:
        writer.observe("service 0: latency high", timestamp=T0, situation="incident")
        writer.observe("service 0: queue depth 40k", timestamp=T0 + timedelta(minutes=1), situation="incident")
        opened, close_open = [], writer._close_open

        def open_another_then_close():  # the other process opens in the window between point and episodes
            opened.append(EpisodicMemory(target, principal="b", encoder=HashingEncoder(dim=64)))
            return close_open()

        with mock.patch.object(writer, "_close_open", open_another_then_close):
            writer.flush()
        with opened[0] as reader:
            reader.observe(
                "service 0: latency high again",
                timestamp=T0 + timedelta(minutes=2),
                situation="incident",
                principal="a",
            )
            reader.flush()
            assert len(reader.episodes("a")) == 2
            assert reader.projection() == reader.rebuild()


def test_a_memory_opened_between_a_flush_point_and_its_episodes_closes_them_there(tmp_path):
    check_open_between_a_flush_point_and_its_episodes(str(tmp_path / "shared.sqlite"))
