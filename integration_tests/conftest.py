"""One Qdrant fixture, four backends: Qdrant Edge in-process (the package's embedded default) and qdrant-client's
local mode (always), a testcontainers server (when a Docker daemon exists) and the server at $QDRANT_URL (when set)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Optional

import pytest
from qdrant_client import AsyncQdrantClient, QdrantClient

from posfair_llamaindex import PosFairEmbedding
from tests.utils import minilm_path


@dataclass
class QdrantBackend:
    name: str
    client: QdrantClient
    make_aclient: Callable[[], AsyncQdrantClient]
    url: Optional[str] = None

    def collection(self) -> str:
        return f"posfair-test-{uuid.uuid4().hex[:10]}"


@pytest.fixture(scope="session")
def qdrant_container():
    try:
        from docker.errors import DockerException
        from testcontainers.community.qdrant import QdrantContainer
    except ImportError as error:
        pytest.skip(f"testcontainers[qdrant] is not installed: {error}")
    try:
        container = QdrantContainer()
    except DockerException as error:
        pytest.skip(f"no Docker daemon for a Qdrant container: {error}")
    with container:
        yield container


@pytest.fixture(params=["edge", "local", "container", "url"])
def qdrant(request, tmp_path):
    if request.param == "edge":
        from posfair_llamaindex import AsyncEdgeQdrantClient, EdgeQdrantClient

        folder = str(tmp_path / "edge")
        client = EdgeQdrantClient(path=folder)
        # the async client shares the folder's store, as an application's two clients of one folder do
        yield QdrantBackend("edge", client, lambda: AsyncEdgeQdrantClient(path=folder))
        client.close()
        return
    if request.param == "local":
        client = QdrantClient(path=str(tmp_path / "sync"))
        # embedded Qdrant locks its folder per client, so the async client gets a folder of its own
        backend = QdrantBackend("local", client, lambda: AsyncQdrantClient(path=str(tmp_path / "async")))
        yield backend
        client.close()
        return
    if request.param == "container":
        container = request.getfixturevalue("qdrant_container")
        url = f"http://{container.get_container_host_ip()}:{container.exposed_rest_port}"
        api_key = None
    else:
        url = os.environ.get("QDRANT_URL")
        if not url:
            pytest.skip("QDRANT_URL is not set")
        api_key = os.environ.get("QDRANT_API_KEY")
    client = QdrantClient(url=url, api_key=api_key)
    backend = QdrantBackend(request.param, client, lambda: AsyncQdrantClient(url=url, api_key=api_key), url=url)
    created_before = {c.name for c in client.get_collections().collections}
    yield backend
    for collection in client.get_collections().collections:
        if collection.name.startswith("posfair-test-") and collection.name not in created_before:
            client.delete_collection(collection.name)
    client.close()


@pytest.fixture(scope="session")
def embed_model():
    return PosFairEmbedding(minilm_path(), embed_batch_size=16)


@pytest.fixture(scope="session")
def other_embed_model(embed_model):
    from posfair_llamaindex import CalibrationConfig

    return PosFairEmbedding(minilm_path(), calibration=CalibrationConfig(strength=0.3), encoder=embed_model.encoder)


@pytest.fixture(scope="session")
def wrapped_texts():
    """The texts that the wrapped-embedding tests (test_wrapped_server.py, test_wrapped_fastembed.py) embed."""
    from integration_tests.window_vectors import wrapped_corpus

    return wrapped_corpus()


@pytest.fixture(scope="session")
def native_windows(wrapped_texts):
    """Windows mode on the package's own MiniLM: what every wrapped backend must reproduce."""
    from integration_tests.window_vectors import WINDOWS

    model = PosFairEmbedding(minilm_path(), mode="windows", windows=WINDOWS)
    return model, model.get_text_embedding_batch(wrapped_texts)


@pytest.fixture(scope="session")
def warm_python():
    """Scripts in forked children of a Python that has imported the model stack once (tests/warm_python.py)."""
    from tests.warm_python import WarmPython

    return WarmPython.shared()  # one for the session, closed when it ends (tests/warm_python.py)
