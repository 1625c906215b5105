"""The embedded default's broker (garden/broker.py) with real processes producing and
consuming one folder at once: every message is delivered once, whole.

kombu's own filesystem transport, given the same load (4 producers x 25 messages of 200 KB,
3 consumers), delivered 76 of 100 here: a reader claimed files their writers had created but
not yet written and failed with JSONDecodeError, which stops a Celery worker.
"""

from __future__ import annotations

import multiprocessing
import os
import uuid

import pytest
from kombu import Connection

TRANSPORT = "garden.broker:Transport"


def options(root) -> dict:
    return {
        "data_folder_in": str(root / "queue"),
        "data_folder_out": str(root / "queue"),
        "processed_folder": str(root / "processed"),
        "control_folder": str(root / "control"),
        "store_processed": False,
        "polling_interval": 0.01,
    }


def connection(root) -> Connection:
    return Connection("filesystem://", transport=TRANSPORT, transport_options=options(root))


def produce(root, name: str, who: int, count: int, size: int) -> None:
    with connection(root) as conn:
        queue = conn.SimpleQueue(name)
        for i in range(count):
            queue.put({"id": f"{who}-{i}", "pad": "x" * size})
        queue.close()


def consume(root, name: str, results, done) -> None:
    got, errors, idle = [], [], 0
    with connection(root) as conn:
        queue = conn.SimpleQueue(name)
        while idle < 20:
            try:
                message = queue.get(block=True, timeout=0.05)
            except queue.Empty:
                idle = idle + 1 if done.is_set() else 0
                continue
            except Exception as exc:  # what would stop a worker
                errors.append(repr(exc))
                continue
            got.append(message.payload["id"])
            message.ack()
        queue.close()
    results.put((got, errors))


@pytest.fixture
def root(tmp_path):
    for name in ("queue", "processed", "control"):
        (tmp_path / name).mkdir()
    return tmp_path


@pytest.fixture
def name():
    """A queue of the test's own: a process remembers the queues it has bound (kombu's
    filesystem state is per process), whatever folder they were bound in."""
    return f"stress-{uuid.uuid4().hex}"


def test_processes_producing_and_consuming_at_once_get_every_message_once_and_whole(root, name):
    context = multiprocessing.get_context("fork")
    results, done = context.Queue(), context.Event()
    consumers = [
        context.Process(target=consume, args=(root, name, results, done)) for _ in range(3)
    ]
    producers = [
        context.Process(target=produce, args=(root, name, w, 25, 200_000)) for w in range(4)
    ]
    for process in consumers + producers:
        process.start()
    for process in producers:
        process.join(60)
    done.set()
    received = [results.get(timeout=60) for _ in consumers]
    for process in consumers:
        process.join(10)
    ids = [i for got, _ in received for i in got]
    assert [e for _, errors in received for e in errors] == []
    assert sorted(ids) == sorted(f"{w}-{i}" for w in range(4) for i in range(25))
    assert not list((root / "claimed").iterdir()) and not list((root / "incoming").iterdir())


def test_a_message_claimed_by_a_process_that_died_goes_back_to_the_queue(root, name):
    with connection(root) as conn:
        conn.SimpleQueue(name).put({"id": "orphan"})
    [file] = os.listdir(root / "queue")
    # As a reader that died between its claim and its read leaves it (no live pid 2**22+1).
    os.rename(root / "queue" / file, root / "claimed" / f"{file}.{2**22 + 1}")
    with connection(root) as conn:
        message = conn.SimpleQueue(name).get(timeout=2)
        assert message.payload == {"id": "orphan"}
        message.ack()


def test_an_unreadable_message_is_set_aside_and_the_next_one_delivered(root, name):
    with connection(root) as conn:
        queue = conn.SimpleQueue(name)
        queue.put({"id": "good"})
        (root / "queue" / f"{0:015d}_broken.{name}.msg").write_bytes(b"")
        message = queue.get(timeout=2)
        assert message.payload == {"id": "good"}
        message.ack()
    assert [p.name for p in (root / "bad").iterdir()] == [f"{0:015d}_broken.{name}.msg"]
