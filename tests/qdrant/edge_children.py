"""Child processes for the Edge store tests: a writer killed mid-way, a process holding a store, a read-only opener.

Run as ``python -m tests.qdrant.edge_children ROLE ...`` from the repository root. Each child tells the test where it
stands through files (an acknowledgement per written batch, a "ready" file), never through timing.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import time
from pathlib import Path

from qdrant_client import models

KILL_COLLECTION = "batches"
HELD_COLLECTION = "held"
DIMENSION = 4
WAIT_LIMIT_S = 120.0


def batch_points(batch: int, size: int) -> list[models.PointStruct]:
    """The points of batch ``batch``: ids and vectors fixed by the batch number, so a rerun writes the same points."""
    points = []
    for j in range(size):
        point = batch * size + j
        vector = [1.0 + (point % 7), float(point % 5), float(batch), 1.0]
        points.append(models.PointStruct(id=point, vector=vector, payload={"batch": batch, "j": j}))
    return points


def create_batches_collection(client) -> None:
    if not client.collection_exists(KILL_COLLECTION):
        client.create_collection(
            KILL_COLLECTION, vectors_config=models.VectorParams(size=DIMENSION, distance=models.Distance.DOT)
        )


def writer(path: str, acks: str, batches: int, size: int) -> None:
    """Write ``batches`` batches; after each upsert returns, append its number to ``acks`` (synced to disk)."""
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    client = EdgeQdrantClient(path)
    create_batches_collection(client)
    with open(acks, "a", encoding="utf-8") as log:
        for batch in range(batches):
            client.upsert(KILL_COLLECTION, batch_points(batch, size))
            log.write(f"{batch}\n")
            log.flush()
            os.fsync(log.fileno())
    client.close()


def holder(path: str, ready: str, release: str) -> None:
    """Open the store, write one point, say so in ``ready``, and keep it open until ``release`` appears."""
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    client = EdgeQdrantClient(path)
    if not client.collection_exists(HELD_COLLECTION):
        client.create_collection(
            HELD_COLLECTION, vectors_config=models.VectorParams(size=DIMENSION, distance=models.Distance.DOT)
        )
    client.upsert(HELD_COLLECTION, [models.PointStruct(id=1, vector=[1.0, 0.0, 0.0, 0.0])])
    Path(ready).write_text(str(os.getpid()), encoding="utf-8")
    deadline = time.monotonic() + WAIT_LIMIT_S
    while not Path(release).exists():
        if time.monotonic() > deadline:
            sys.exit("the test never released the store")
        time.sleep(0.01)
    client.close()


def drop_file_override() -> bool:
    """Give up CAP_DAC_OVERRIDE, so file permissions bind this process even as root (Linux only)."""

    class Header(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]

    class Data(ctypes.Structure):
        _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]

    libc = ctypes.CDLL(None, use_errno=True)
    header, data = Header(0x20080522, 0), (Data * 2)()  # _LINUX_CAPABILITY_VERSION_3
    if libc.capget(ctypes.byref(header), data) != 0:
        return False
    override = 1 << 1  # CAP_DAC_OVERRIDE
    data[0].effective &= ~override
    data[0].permitted &= ~override
    return libc.capset(ctypes.byref(header), data) == 0


def read_only_opener(path: str) -> None:
    """Try to open ``path`` without the power to write to it; print what happened as JSON."""
    if os.geteuid() == 0 and not drop_file_override():
        print(json.dumps({"skipped": "could not drop CAP_DAC_OVERRIDE"}))
        return
    if os.access(path, os.W_OK):
        print(json.dumps({"skipped": f"{path} is still writable by this process"}))
        return
    from posfair_llamaindex.qdrant.edge_client import EdgeQdrantClient

    try:
        EdgeQdrantClient(path)
    except Exception as error:
        print(json.dumps({"error": type(error).__name__, "message": str(error)}))
    else:
        print(json.dumps({"error": None}))


if __name__ == "__main__":
    role, *arguments = sys.argv[1:]
    if role == "writer":
        writer(arguments[0], arguments[1], int(arguments[2]), int(arguments[3]))
    elif role == "holder":
        holder(*arguments)
    elif role == "read-only":
        read_only_opener(*arguments)
    else:
        sys.exit(f"unknown role {role!r}")
