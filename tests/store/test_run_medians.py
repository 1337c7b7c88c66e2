import dataclasses
import math

import numpy as np

from torchmark.store.run_medians import RunMedians
from torchmark.verdicts.family import ratio_of, ratios_of, shifts_of, shifts_of_arrays


def test_two_runs_are_aligned_by_key_whatever_their_order():
    a = RunMedians([("c0", "wall"), ("c1", "wall"), ("c2", "wall")], np.array([1.0, 2.0, 3.0]))
    b = RunMedians([("c2", "wall"), ("c9", "wall"), ("c0", "wall")], np.array([6.0, 9.0, 2.0]))
    keys, base, cand = a.aligned(b)
    assert keys == [("c0", "wall"), ("c2", "wall")]
    assert base.tolist() == [1.0, 3.0] and cand.tolist() == [2.0, 6.0]
    same = RunMedians(list(a.keys), np.array([4.0, 5.0, 6.0]))
    keys, base, cand = a.aligned(same)
    assert keys == a.keys and cand.tolist() == [4.0, 5.0, 6.0]
    assert a.only({"c1"}).as_dict() == {("c1", "wall"): 2.0}
    assert RunMedians([("c", "wall")], np.array([math.nan])).as_dict() == {("c", "wall"): None}


def test_the_array_ratios_and_shifts_are_the_per_case_ones():
    rng = np.random.default_rng(0)
    base = np.concatenate([rng.lognormal(size=40), [0.0, -1.0, math.inf, math.nan, 2.0]])
    cand = np.concatenate([rng.lognormal(size=40), [1.0, 1.0, 1.0, 1.0, math.nan]])
    one_by_one = [ratio_of(None if math.isnan(x) else x, None if math.isnan(y) else y)
                  for x, y in zip(base.tolist(), cand.tolist(), strict=True)]
    arrays = ratios_of(base, cand)
    assert [None if math.isnan(r) else r for r in arrays.tolist()] == one_by_one
    metrics = ["wall", "device", "instructions"] * 15
    assert shifts_of_arrays(metrics, arrays) == shifts_of(zip(metrics, one_by_one, strict=True))
    assert set(shifts_of_arrays(metrics, arrays)) == {"wall", "device"}  # counts: no shift


def _result(i: int, level: float, failure: str | None = None):
    from torchmark.core.result import Case, Failure, Result

    case = Case(id=f"timeit:p{i}", frontend="timeit", stmt=f"g({i})", label="g")
    return Result(case=case, metric="wall", unit="s", number_per_run=1,
                  samples=() if failure else (level, level * 1.1, level * 0.9),
                  failure=Failure(failure) if failure else None)


def _packed_rows(store) -> dict[int, int]:
    import sqlalchemy as sa

    from torchmark.store import schema

    with store.engine.connect() as conn:
        return dict(conn.execute(sa.select(schema.run_medians.c.run_id,
                                           schema.run_medians.c.results)).all())


def test_a_finished_run_s_medians_are_read_from_its_packed_row(tmp_path):
    import sqlalchemy as sa

    from torchmark.core.provenance import Provenance
    from torchmark.store import Store, schema

    store = Store(f"sqlite:///{tmp_path / 'packed.db'}")
    running = store.start_run(Provenance.capture())
    store.record([_result(0, 1.0), _result(1, 2.0, failure="boom")], running)
    assert _packed_rows(store) == {}  # still running: read from its results
    store.finish_run(running)
    one_shot = store.record([_result(0, 3.0), _result(2, 5.0)])  # a run of its own
    assert one_shot == 2
    assert sorted(_packed_rows(store).values()) == [2, 2]
    first = Store(store.url)  # a fresh process's view: nothing in memory
    assert first.run_medians(running).as_dict() == {("timeit:p0", "wall"): 1.0,
                                                   ("timeit:p1", "wall"): None}
    with store.engine.begin() as conn:  # the packed row is what it reads
        conn.execute(schema.run_medians.update().where(
            schema.run_medians.c.run_id == running).values(
            medians=np.array([7.0, 8.0]).astype("<f8").tobytes()))
    assert Store(store.url).run_medians(running).as_dict()[("timeit:p0", "wall")] == 7.0
    with store.engine.begin() as conn:  # a write its packed row does not know of
        store.count_result_write(conn, running)
    assert Store(store.url).run_medians(running).as_dict()[("timeit:p0", "wall")] == 1.0
    store.pack_medians(running)
    # results added to the finished run: its packed row no longer holds for it
    store.record([_result(3, 4.0)], running)
    assert Store(store.url).run_medians(running).as_dict() == {
        ("timeit:p0", "wall"): 1.0, ("timeit:p1", "wall"): None, ("timeit:p3", "wall"): 4.0}
    # a row not as torchmark writes it is not used
    with store.engine.begin() as conn:
        store.pack_medians(running, conn)
        conn.execute(schema.run_medians.update().where(
            schema.run_medians.c.run_id == running).values(medians=b"\0" * 5))
    assert Store(store.url).run_medians(running).as_dict()[("timeit:p0", "wall")] == 1.0
    with store.engine.begin() as conn:
        store.pack_medians(running, conn)
        conn.execute(schema.median_keys.update().values(key_list=b'[["x"]]'))
    assert len(Store(store.url).run_medians(running).keys) == 3
    assert store.delete_runs([running]) == 1
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(
            schema.run_medians).where(schema.run_medians.c.run_id == running)).scalar() == 0
        # the deleted run's key list went with it; the other run's stays
        assert conn.execute(sa.select(sa.func.count()).select_from(
            schema.median_keys)).scalar() == 1
    assert len(store.run_medians(running).keys) == 0


def test_two_runs_of_one_suite_share_their_key_list(tmp_path):
    import sqlalchemy as sa

    from torchmark.store import Store, schema

    store = Store(f"sqlite:///{tmp_path / 'shared.db'}")
    a = store.record([_result(i, 1.0 + i) for i in range(5)])
    b = store.record([_result(i, 2.0 + i) for i in range(5)])
    with store.engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(
            schema.median_keys)).scalar() == 1
    fresh = Store(store.url)
    runs = [r["id"] for r in fresh.runs(limit=None)]
    first, second = (fresh.run_medians(run) for run in runs)
    assert first.keys is second.keys  # one list in memory: compared at once
    keys, base, cand = first.aligned(second)
    assert len(keys) == 5 and (a, b) == (5, 5)


def test_an_imported_run_is_packed(tmp_path):
    from torchmark.core.results_file import save_results
    from torchmark.store import Store

    path = tmp_path / "results.jsonl"
    save_results(path, [_result(0, 1.0), _result(1, 2.0)])
    store = Store(f"sqlite:///{tmp_path / 'imported.db'}")
    assert store.import_file(path) == 2
    [run] = [r["id"] for r in store.runs(limit=None)]
    assert _packed_rows(store) == {run: 2}
    assert Store(store.url).run_medians(run).as_dict() == {("timeit:p0", "wall"): 1.0,
                                                           ("timeit:p1", "wall"): 2.0}


def test_a_case_measured_again_in_a_resumed_run_counts_once(tmp_path):
    """A failed case measured again into its resumed run: the run holds it twice, the
    comparison takes its last result (as before packing)."""
    from torchmark.core.provenance import Provenance
    from torchmark.report.views import compare_view
    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'resumed.db'}")
    a = store.start_run(Provenance.capture())
    store.record([_result(i, 1.0) for i in range(6)] + [_result(6, 0, failure="oom")], a)
    store.finish_run(a)
    store.reopen_run(a)
    store.record([_result(6, 2.0)], a)
    store.finish_run(a)
    b = store.record([_result(i, 1.0) for i in range(7)])
    assert b == 7
    b_id = max(r["id"] for r in store.runs(limit=None))
    for first, second in ((a, b_id), (b_id, a)):
        view = compare_view(Store(store.url), first, second)
        assert (view["total"], view["only_baseline"], view["only_candidate"]) == (7, 0, 0)
        assert len({row["case_id"] for row in view["rows"]}) == 7
    assert Store(store.url).run_medians(a).as_dict()[("timeit:p6", "wall")] == 2.0


def test_a_packed_row_not_as_torchmark_writes_it_is_read_from_the_results(tmp_path):
    import sqlalchemy as sa

    from torchmark.store import Store

    store = Store(f"sqlite:///{tmp_path / 'odd.db'}")
    store.record([_result(0, 1.0), _result(1, 2.0)])
    [run] = [r["id"] for r in store.runs(limit=None)]
    damaged = [("run_medians", "medians", "abcdefghabcdefgh"),  # text, not bytes
               ("run_medians", "medians", 16),
               ("median_keys", "key_list", b"[" * 100_000 + b"]" * 100_000),
               ("median_keys", "key_list", b'[["timeit:p0","wall"],["timeit:p0","wall"]]'),
               ("median_keys", "key_list", "not bytes")]
    for table, column, value in damaged:
        with store.engine.begin() as conn:
            store.pack_medians(run, conn)
            conn.execute(sa.text(f"UPDATE {table} SET {column} = :value"), {"value": value})
        assert Store(store.url).run_medians(run).as_dict() == {("timeit:p0", "wall"): 1.0,
                                                               ("timeit:p1", "wall"): 2.0}


def test_a_run_s_result_count_is_its_own_after_it_is_resumed(tmp_path):
    """The runs page reads a finished run's count from its packed row: a run resumed
    and finished again counts its new results (a Store opened afresh each time)."""
    from torchmark.core.provenance import Provenance
    from torchmark.store import Store

    url = f"sqlite:///{tmp_path / 'count.db'}"
    store = Store(url)
    run = store.start_run(Provenance.capture())
    store.record([_result(i, 1.0) for i in range(3)], run)
    assert Store(url).runs_page()[0][0]["results"] == 3  # running: counted
    store.finish_run(run)
    assert _packed_rows(store) == {run: 3}
    assert Store(url).runs_page()[0][0]["results"] == 3
    store.reopen_run(run)
    store.record([_result(i, 1.0) for i in range(3, 5)], run)
    assert Store(url).runs_page()[0][0]["results"] == 5
    store.finish_run(run)
    assert Store(url).runs_page()[0][0]["results"] == 5


def test_a_long_lived_store_counts_results_recorded_into_a_finished_run(tmp_path):
    """A server's Store keeps a finished run's count: results recorded into the run
    after it finished (another process's Store) count at once (its result writes
    changed), as its packed medians are read anew."""
    from torchmark.store import Store

    url = f"sqlite:///{tmp_path / 'count.db'}"
    server = Store(url)
    Store(url).record([_result(i, 1.0) for i in range(3)])
    [run] = [r["id"] for r in server.runs(limit=None)]
    assert server.runs_page()[0][0]["results"] == 3
    assert len(server.run_medians(run).keys) == 3
    Store(url).record([_result(i, 2.0) for i in range(3, 5)], run)  # finished: repacked
    assert server.runs_page()[0][0]["results"] == 5
    assert server.run_medians(run).as_dict()[("timeit:p4", "wall")] == 2.0


def test_a_run_made_again_under_a_deleted_run_s_id_is_read_afresh(tmp_path):
    """SQLite gives a deleted newest run's id to the next; made at the same start, the
    new run counts its writes from 0 again: a long-lived Store still reads its own
    medians (the last change's time tells them apart), and its own count."""
    from torchmark.core.provenance import Provenance
    from torchmark.store import Store

    url = f"sqlite:///{tmp_path / 'reused.db'}"
    server, writer = Store(url), Store(url)
    provenance = Provenance.capture()
    writer.record([dataclasses.replace(_result(0, 1.0), provenance=provenance)])
    [run] = [r["id"] for r in server.runs(limit=None)]
    assert server.run_medians(run).as_dict()[("timeit:p0", "wall")] == 1.0
    assert server.runs_page()[0][0]["results"] == 1
    assert writer.delete_runs([run]) == 1
    writer.record([dataclasses.replace(_result(0, 5.0), provenance=provenance),
                   dataclasses.replace(_result(1, 5.0), provenance=provenance)])
    assert [r["id"] for r in server.runs(limit=None)] == [run]  # the same id
    assert server.run_medians(run).as_dict()[("timeit:p0", "wall")] == 5.0
    assert server.runs_page()[0][0]["results"] == 2
