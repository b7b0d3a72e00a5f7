"""The live store's key-value table under threads of one process: concurrent inserts of one key see one winner."""

from __future__ import annotations

import threading

from furnace.storage.sql.db import SQLDatabase, sqlite_url
from furnace.storage.sql.kv import SQLKV


def test_threads_racing_on_one_key_agree_on_the_winner(tmp_path) -> None:
    kv = SQLKV(SQLDatabase(sqlite_url(tmp_path), home=tmp_path))  # a home's furnace.sqlite
    results: list[dict] = []
    errors: list[BaseException] = []
    start = threading.Barrier(16)

    def put(i: int) -> None:
        start.wait()
        try:
            results.append(kv.put_if_absent("synth:race", {"builder": i}))
        except BaseException as err:  # noqa: BLE001 - the assertion below reports it
            errors.append(err)

    threads = [threading.Thread(target=put, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 16 and len({r["builder"] for r in results}) == 1
    assert kv.get("synth:race") == results[0]
