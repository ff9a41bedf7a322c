"""The query's vector, made by a second process while ``posfair query`` opens the store.

A query spends most of its time loading torch, transformers and the model; opening the store costs qdrant-client
and LlamaIndex, which need none of them. Run one after the other they add up; on two cores they overlap. So
``posfair query`` starts this module as a child at once, the child imports the model's libraries while the parent
reads the collection's tag, and the parent then sends what the tag says to load (one JSON line on stdin). The child
answers one JSON line: the vector and the encoder's part of the tag (``PosFairEncoder.tag_facts``), which the
parent compares with the stored tag before it searches, as the store would with an embedding of its own.

The parent never imports torch; the child imports neither qdrant-client nor LlamaIndex, nor the command line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import TYPE_CHECKING, Any, Optional, Union

from posfair_llamaindex.errors import QueryEncodingError

if TYPE_CHECKING:  # the child never imports pydantic
    from posfair_llamaindex.encoding.load_config import LoadConfig

# what the parent sends, besides the text: PosFairEmbedding's settings that decide how a query is encoded
REQUEST_KEYS = ("model_name", "load", "query_instruction", "text_instruction", "normalize")


class QueryEncoderProcess:
    """The child process, started at once; :meth:`send` gives it the settings, :meth:`receive` waits for the
    vector."""

    def __init__(self) -> None:
        self._process: Optional[subprocess.Popen] = subprocess.Popen(
            [sys.executable, "-m", __name__],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )

    def send(self, request: dict[str, Any], text: str) -> None:
        """Hand the child ``text`` and the settings ``request`` (:data:`REQUEST_KEYS`); it starts loading at once."""
        process = self._running()
        line = json.dumps({**{key: request[key] for key in REQUEST_KEYS}, "text": text})
        try:
            process.stdin.write(line + "\n")
            process.stdin.close()
        except BrokenPipeError:
            pass  # the child has ended already; receive() says how

    def receive(self) -> tuple[list[float], dict[str, Any]]:
        """``(vector, tag facts)``, once the child has them."""
        process = self._running()
        self._process = None
        answer = process.stdout.read()
        process.stdout.close()
        process.wait()
        reply = _reply(answer)
        if reply is None:
            raise QueryEncodingError(f"the process that encodes the query ended with exit code {process.returncode}")
        return vector_and_facts(reply)

    def close(self) -> None:
        """Stop the child if it is still waiting (the command was refused before it needed the vector)."""
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.kill()
        process.wait()
        for stream in (process.stdin, process.stdout):
            if stream is not None and not stream.closed:
                stream.close()

    def __enter__(self) -> QueryEncoderProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _running(self) -> subprocess.Popen:
        if self._process is None:
            raise RuntimeError("this QueryEncoderProcess has already answered or was closed")
        return self._process


class InProcessQueryEncoder:
    """The same answer made in this process, for a caller that has the model's libraries loaded already (``main()``
    called from Python, a notebook): a child would import them a second time and overlap nothing."""

    def __init__(self) -> None:
        self._reply: Optional[dict[str, Any]] = None

    def send(self, request: dict[str, Any], text: str) -> None:
        self._reply = answer_or_error({**{key: request[key] for key in REQUEST_KEYS}, "text": text})

    def receive(self) -> tuple[list[float], dict[str, Any]]:
        reply, self._reply = self._reply, None
        if reply is None:
            raise RuntimeError("send() a request before receive()")
        return vector_and_facts(reply)

    def close(self) -> None:
        self._reply = None

    def __enter__(self) -> InProcessQueryEncoder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def model_libraries_loaded() -> bool:
    """Whether this process has imported torch and transformers already (then a child gains nothing)."""
    return "torch" in sys.modules and "transformers" in sys.modules


# the process `posfair query` starts before its command line loads (cli.main), until run_query takes it
_early: Optional[QueryEncoderProcess] = None


def start_early() -> None:
    global _early
    if _early is None and not model_libraries_loaded():
        _early = QueryEncoderProcess()


def take() -> Union[QueryEncoderProcess, InProcessQueryEncoder]:
    """The process started early, else a new one; in a process that has the model's libraries, no process."""
    global _early
    process, _early = _early, None
    if process is not None:
        return process
    return InProcessQueryEncoder() if model_libraries_loaded() else QueryEncoderProcess()


def discard_early() -> None:
    """Stop the early process if nothing took it (the command was refused, or encodes in process)."""
    global _early
    process, _early = _early, None
    if process is not None:
        process.close()


def _reply(answer: str) -> Optional[dict[str, Any]]:
    lines = [line for line in (answer or "").splitlines() if line.strip()]
    try:
        return json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None


def query_request(settings: dict[str, Any], load: LoadConfig) -> dict[str, Any]:
    """What the child needs: the model, how it loads (``load``) and how ``PosFairEmbedding``'s ``settings`` (as
    ``embedding_settings`` builds them) encode a query."""
    return {
        "model_name": settings["model_name"],
        "load": load.encoder_arguments(),
        "query_instruction": settings.get("query_instruction"),
        "text_instruction": settings.get("text_instruction"),
        "normalize": settings.get("normalize", True),
    }


def answer(request: dict[str, Any]) -> dict[str, Any]:
    """The child's work: load the encoder the request names, encode its text as a query."""
    from posfair_llamaindex.encoding.encoder import PosFairEncoder

    # the load settings were checked by LoadConfig in the parent (query_request); pydantic is not loaded here
    encoder = PosFairEncoder(request["model_name"], **request["load"])
    query_prompt, document_prompt = encoder.default_prompts
    query_instruction = request["query_instruction"] if request["query_instruction"] is not None else query_prompt
    text_instruction = request["text_instruction"] if request["text_instruction"] is not None else document_prompt
    vector = encoder.encode_query(request["text"], query_instruction or "", normalize=request["normalize"])
    return {"vector": vector.tolist(), "facts": encoder.tag_facts(text_instruction or "")}


def answer_or_error(request: Union[dict[str, Any], str]) -> dict[str, Any]:
    """:func:`answer` to a request (or to its JSON line), or its failure as one line: the reply the child writes
    and :func:`vector_and_facts` reads."""
    try:
        return answer(json.loads(request) if isinstance(request, str) else request)
    except Exception as error:
        return {"error": " ".join(str(error).split()) or type(error).__name__}


def vector_and_facts(reply: dict[str, Any]) -> tuple[list[float], dict[str, Any]]:
    """A reply's vector and tag facts; its error raised as :class:`QueryEncodingError`."""
    if "error" in reply:
        raise QueryEncodingError(reply["error"])
    return reply["vector"], reply["facts"]


def main() -> int:
    # torch and transformers load here, while the parent opens the store; the parent's environment already
    # keeps transformers quiet (the command line sets it before this process starts)
    from transformers.utils import logging as transformers_logging

    import posfair_llamaindex.encoding.encoder  # noqa: F401

    transformers_logging.disable_progress_bar()
    transformers_logging.set_verbosity_error()
    line = sys.stdin.readline()
    if not line.strip():  # the parent refused the command and closed the pipe
        return 0
    reply = answer_or_error(line)  # a failure is reported by the parent, as one line
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
