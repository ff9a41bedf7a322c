"""A stand-in Qdrant server on 127.0.0.1 for the tests (there is no Qdrant binary and no Docker here).

It speaks the part of Qdrant's REST API that posfair uses, backed by an in-memory embedded Qdrant, so
filters, retrieves and counts behave as Qdrant's own code makes them. It can refuse the first requests of
a kind with HTTP 503, as a server under load does, and it records what it was asked.
"""

from __future__ import annotations

import json
import re
import threading
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Optional

from qdrant_client import QdrantClient
from qdrant_client.http import models

QDRANT_VERSION = "1.20.0"


def _dump(value: Any) -> Any:
    if isinstance(value, list):
        return [_dump(item) for item in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value


class QdrantStub:
    """``with QdrantStub(refuse={"upsert": 2}) as stub: QdrantClient(url=stub.url)``.

    ``refuse``: answer the first requests of a kind with 503. ``stall_after``: once that many requests of a
    kind were applied, hold the next ones unanswered until :meth:`release`, then drop them with 503 (a
    writer killed meanwhile leaves exactly what was applied before).
    """

    def __init__(self, refuse: Optional[dict[str, int]] = None, stall_after: Optional[dict[str, int]] = None) -> None:
        self.local = QdrantClient(":memory:")
        self.refuse = Counter(refuse or {})
        self.stall_after = dict(stall_after or {})
        self.seen: Counter = Counter()  # requests per kind, refused ones included
        self.refused: Counter = Counter()
        self.applied: Counter = Counter()
        self._released = threading.Event()
        # set when a request is first held: the writer has had its first requests applied and now waits on the stub
        self.stalled = threading.Event()
        self.created: list[dict] = []  # the create_collection bodies
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> QdrantStub:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.release()
        self._server.shutdown()
        self._server.server_close()
        self.local.close()

    def release(self) -> None:
        """Drop the stalled requests (503) and stall no more."""
        self.stall_after.clear()
        self._released.set()

    def read(self, call):
        """``call(local client)`` under the lock the request handlers hold."""
        with self._lock:
            return call(self.local)

    # ------------------------------------------------------------------ the API
    def answer(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        path = path.split("?", 1)[0].rstrip("/")
        if method == "GET" and path == "":
            return 200, {"title": "qdrant - vector search engine (posfair test stub)", "version": QDRANT_VERSION}
        if method == "GET" and path == "/collections":
            names = [c.name for c in self.local.get_collections().collections]
            return 200, {"collections": [{"name": name} for name in names]}
        match = re.fullmatch(r"/collections/([^/]+)(/.*)?", path)
        if not match:
            return 404, {"error": f"no route {method} {path}"}
        name, rest = match.group(1), match.group(2) or ""
        kind = {
            ("GET", "/exists"): "exists",
            ("GET", ""): "get_collection",
            ("PUT", ""): "create_collection",
            ("DELETE", ""): "delete_collection",
            ("PUT", "/index"): "create_index",
            ("PUT", "/points"): "upsert",
            ("POST", "/points"): "retrieve",
            ("POST", "/points/delete"): "delete",
            ("POST", "/points/count"): "count",
            ("POST", "/points/scroll"): "scroll",
        }.get((method, rest))
        if kind is None:
            return 404, {"error": f"no route {method} {path}"}
        if kind in self.stall_after and self.applied[kind] >= self.stall_after[kind]:
            self.stalled.set()
            self._released.wait(timeout=300)
            return 503, {"error": f"stub held {kind} and dropped it"}
        with self._lock:
            self.seen[kind] += 1
            if self.refused[kind] < self.refuse[kind]:
                self.refused[kind] += 1
                return 503, {"error": f"stub refuses {kind} attempt {self.refused[kind]}"}
            result = self._call(kind, name, body or {})
            self.applied[kind] += 1
            return 200, result

    def _call(self, kind: str, name: str, body: dict) -> Any:
        local = self.local
        if kind == "exists":
            return {"exists": local.collection_exists(name)}
        if kind == "get_collection":
            return _dump(local.get_collection(name))
        if kind == "create_collection":
            self.created.append(body)
            request = models.CreateCollection.model_validate(body)
            return local.create_collection(name, vectors_config=request.vectors, metadata=request.metadata)
        if kind == "delete_collection":
            return local.delete_collection(name)
        if kind == "create_index":
            return {"operation_id": 0, "status": "completed"}
        if kind == "upsert":
            points = models.PointsList.model_validate(body).points
            return _dump(local.upsert(name, points=points, wait=True))
        if kind == "retrieve":
            request = models.PointRequest.model_validate(body)
            records = local.retrieve(
                name, ids=request.ids, with_payload=request.with_payload, with_vectors=request.with_vector
            )
            return _dump(records)
        if kind == "delete":
            selector = (
                models.FilterSelector.model_validate(body)
                if "filter" in body
                else models.PointIdsList.model_validate(body)
            )
            return _dump(local.delete(name, points_selector=selector, wait=True))
        if kind == "count":
            request = models.CountRequest.model_validate(body)
            return _dump(local.count(name, count_filter=request.filter, exact=request.exact))
        request = models.ScrollRequest.model_validate(body)
        records, offset = local.scroll(
            name,
            scroll_filter=request.filter,
            limit=request.limit or 10,
            offset=request.offset,
            with_payload=request.with_payload,
            with_vectors=request.with_vector,
        )
        return {"points": _dump(records), "next_page_offset": offset}

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _serve(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                try:
                    status, result = stub.answer(self.command, self.path, body)
                except Exception as error:  # a bug in a request: answer it as Qdrant would, not by hanging
                    status, result = 400, {"error": f"{type(error).__name__}: {error}"}
                if self.path.split("?", 1)[0].rstrip("/") == "" and status == 200:
                    payload = result
                elif status == 200:
                    payload = {"time": 0.0, "status": "ok", "result": result}
                else:
                    payload = {"time": 0.0, "status": {"error": result["error"]}}
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = _serve

            def log_message(self, *args) -> None:  # quiet
                pass

        return Handler
