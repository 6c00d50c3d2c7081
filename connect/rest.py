"""Kafka Connect's REST API over a :class:`~connect.worker.Worker`: the same paths, methods, status
codes and bodies, so ``curl`` recipes, dashboards and tools written for Kafka Connect work here.

    server = RestServer(worker, "127.0.0.1", 0).start()    # uvicorn in a thread; port 0: a free port
    server.url                                              # "http://127.0.0.1:41235"
    server.stop()

Every route is a thin shell: it parses the request, calls one worker method (thread-safe; the
sync routes run in Starlette's thread pool) and picks Kafka's status code. Errors are Connect's
body ``{"error_code": <http status>, "message": ...}``: the worker's typed errors carry their
status (:class:`~connect.errors.RestError`; ``ConfigError`` is 400, anything else 500); an unknown
path is Jersey's ``HTTP 404 Not Found``; a body that is not JSON, or not the JSON shape a route
takes, is 500 with the parser's message, as Kafka's Jackson mapping answers.
"""
from __future__ import annotations

import threading
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from broker.errors import InvalidConfigError, RiverlogError
from connect.errors import BadRequestError, NotFoundError
from connect.java_text import config_text, json_loads
from connect.worker_health import DEFAULT_HEALTH_CHECK_TIMEOUT_MS, HEALTHY, OPERATION

__all__ = ["RestServer", "rest_app"]

_NAME_MISMATCH = "Connector name configuration ({}) doesn't match connector name in the URL ({})"
_CONNECTOR_SUFFIX = "Connector"


class _BodyError(Exception):
    """A request body Kafka's JSON mapping would not read (Kafka answers 500 with the parser's message)."""


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error_code": status, "message": message}, status_code=status)


def _status_of(err: RiverlogError) -> int:
    status = getattr(err, "http_status", None)
    if isinstance(status, int):
        return status
    return 400 if isinstance(err, InvalidConfigError) else 500


async def _body(request: Request) -> Any:
    """The JSON body, whatever the Content-Type (curl's ``-d`` sends a form type); None when empty."""
    raw = await request.body()
    if not raw.strip():
        return None
    try:
        return json_loads(raw)         # a fraction keeps its text, which a config value is
    except ValueError as e:
        raise _BodyError(f"Unexpected character in the request body: {e}") from None


def _string_map(value: Any, what: str) -> dict[str, str | None]:
    """A JSON object of strings, as Jackson reads ``Map<String, String>``: numbers and booleans
    become their text as written (``true``, ``1.50``), null stays null (validation names it),
    objects and arrays are refused."""
    if not isinstance(value, dict):
        raise _BodyError(f"Cannot deserialize {what}: expected a JSON object, got {type(value).__name__}")
    out: dict[str, str | None] = {}
    for k, v in value.items():
        if isinstance(v, (dict, list)):
            raise _BodyError(f"Cannot deserialize value of type `java.lang.String` from "
                             f"{'Object' if isinstance(v, dict) else 'Array'} value (field {k!r} of {what})")
        out[k] = config_text(v)
    return out


_JAVA_TRIMMED = "".join(chr(c) for c in range(0x21))


def _java_trim(text: str) -> str:
    """Java's ``String.trim()``, which Kafka applies to a new connector's name: it strips every
    character up to U+0020 (control characters such as ``\b`` too) and nothing else (a no-break
    or ideographic space stays)."""
    return text.strip(_JAVA_TRIMMED)


def _location(http: Request, name: str) -> str:
    """The created connector's absolute URL, the name percent-encoded, as JAX-RS resolves Kafka's."""
    from urllib.parse import quote
    return str(http.base_url).rstrip("/") + "/connectors/" + quote(name, safe="")


def _with_name(name: str, config: dict[str, str | None]) -> dict[str, str | None]:
    """Kafka's ``checkAndPutConnectorConfigName``: a ``name`` in the config must be the URL's."""
    included = config.get("name")
    if included is not None and included != name:
        raise BadRequestError(_NAME_MISMATCH.format(included, name))
    return {**config, "name": name}


def _normalized_plugin(name: str) -> str:
    return name[:-len(_CONNECTOR_SUFFIX)] if name.endswith(_CONNECTOR_SUFFIX) and len(name) > len(_CONNECTOR_SUFFIX) \
        else name


def _flag(value: str | None) -> bool:
    return value is not None and value.strip().lower() == "true"


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("riverlog")
    except PackageNotFoundError:
        return "unknown"


async def _operation(request: Request) -> None:
    """Name the request as what the worker's lock holder does (``GET /health`` names a stuck one)."""
    OPERATION.set(f"handling the request {request.method} {request.url.path}")


def rest_app(worker, health_check_timeout_ms: float = DEFAULT_HEALTH_CHECK_TIMEOUT_MS) -> FastAPI:
    """The FastAPI application of ``worker``'s REST API (mount it, or run it with :class:`RestServer`);
    ``GET /health`` waits up to ``health_check_timeout_ms`` for a busy worker (Kafka's 10 s)."""
    app = FastAPI(title="Riverlog Connect", version=_version(), docs_url=None, redoc_url=None, openapi_url=None,
                  dependencies=[Depends(_operation)])
    body = Depends(_body)

    @app.exception_handler(RiverlogError)
    async def _typed(request: Request, err: RiverlogError):
        return _error(_status_of(err), str(err))

    @app.exception_handler(_BodyError)
    async def _unreadable(request: Request, err: _BodyError):
        return _error(500, str(err))

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, err: StarletteHTTPException):
        return _error(err.status_code, f"HTTP {err.status_code} {HTTPStatus(err.status_code).phrase}")

    @app.exception_handler(RequestValidationError)
    async def _unconvertible(request: Request, err: RequestValidationError):
        return _error(404, "HTTP 404 Not Found")       # JAX-RS: a path parameter that does not convert

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, err: Exception):
        return _error(500, f"{type(err).__name__}: {err}")

    # ------------------------------------------------------------------------------- the worker
    @app.get("/")
    def server_info():
        try:
            cluster = getattr(worker, "kafka_cluster_id", None)
        except RiverlogError:   # the broker unreachable just now: the worker still answers
            cluster = None
        return {"version": _version(), "commit": getattr(worker, "commit", None) or "unknown",
                "kafka_cluster_id": cluster}

    @app.get("/health")
    def health():
        """Kafka 4.0's (KIP-1017): 200 healthy, 503 starting, 500 unhealthy (:mod:`connect.worker_health`)."""
        check = getattr(worker, "health", None)
        if not callable(check):   # an object serving the API without a worker's lifecycle
            return {"status": "healthy", "message": HEALTHY}
        status, body = check(health_check_timeout_ms)
        return JSONResponse(body, status_code=status)

    # ---------------------------------------------------------------------------- connectors
    @app.get("/connectors")
    def list_connectors(expand: list[str] = Query(default=[])):
        names = worker.connectors()
        if not expand:
            return names
        out: dict[str, dict] = {}
        for name in names:
            entry: dict[str, Any] = {}
            try:
                if "status" in expand:
                    entry["status"] = worker.connector_status(name)
                if "info" in expand:
                    entry["info"] = worker.connector_info(name)
            except NotFoundError:
                continue                  # deleted since the listing, as Kafka skips it
            out[name] = entry
        return out

    @app.post("/connectors")
    def create_connector(http: Request, request: Any = body):
        if not isinstance(request, dict):
            raise _BodyError("Cannot deserialize the request: expected {\"name\": ..., \"config\": {...}}")
        name = _java_trim(_string_map({"name": request.get("name")}, "the request")["name"] or "")
        if request.get("config") is None:
            raise BadRequestError("Connector config is missing: send {\"name\": ..., \"config\": {...}}")
        config = _with_name(name, _string_map(request["config"], "config"))
        info = worker.create_connector(name, config, request.get("initial_state"))
        return JSONResponse(info, status_code=201, headers={"Location": _location(http, name)})

    @app.get("/connectors/{connector}")
    def connector_info(connector: str):
        return worker.connector_info(connector)

    @app.get("/connectors/{connector}/config")
    def connector_config(connector: str):
        return worker.connector_config(connector)

    @app.put("/connectors/{connector}/config")
    def put_connector_config(http: Request, connector: str, config: Any = body):
        created, info = worker.put_connector_config(connector, _with_name(connector, _string_map(config, "config")))
        if created:
            return JSONResponse(info, status_code=201, headers={"Location": _location(http, connector)})
        return info

    @app.patch("/connectors/{connector}/config")
    def patch_connector_config(connector: str, patch: Any = body):
        patch = _string_map(patch, "config patch")
        if patch.get("name") is not None and patch["name"] != connector:
            raise BadRequestError(_NAME_MISMATCH.format(patch["name"], connector))
        return worker.patch_connector_config(connector, patch)

    @app.get("/connectors/{connector}/status")
    def connector_status(connector: str):
        return worker.connector_status(connector)

    @app.post("/connectors/{connector}/restart")
    def restart_connector(connector: str, includeTasks: str | None = None, onlyFailed: str | None = None):
        status = worker.restart(connector, include_tasks=_flag(includeTasks), only_failed=_flag(onlyFailed))
        return Response(status_code=204) if status is None else JSONResponse(status, status_code=202)

    @app.put("/connectors/{connector}/pause")
    def pause_connector(connector: str):
        worker.pause(connector)
        return Response(status_code=202)

    @app.put("/connectors/{connector}/resume")
    def resume_connector(connector: str):
        worker.resume(connector)
        return Response(status_code=202)

    @app.put("/connectors/{connector}/stop")
    def stop_connector(connector: str):
        worker.stop(connector)          # done when it returns: 204, as Kafka's (pause/resume are 202)
        return Response(status_code=204)

    @app.delete("/connectors/{connector}")
    def delete_connector(connector: str):
        worker.delete_connector(connector)
        return Response(status_code=204)

    # --------------------------------------------------------------------------------- tasks
    @app.get("/connectors/{connector}/tasks")
    def task_configs(connector: str):
        return worker.task_configs(connector)

    @app.get("/connectors/{connector}/tasks/{task}/status")
    def task_status(connector: str, task: int):
        return worker.task_status(connector, task)

    @app.post("/connectors/{connector}/tasks/{task}/restart")
    def restart_task(connector: str, task: int):
        worker.restart_task(connector, task)
        return Response(status_code=204)

    # -------------------------------------------------------------------------------- topics
    def _tracking(reset: bool = False) -> JSONResponse | None:
        """``ConnectorsResource``'s 403s: topic tracking off, or its reset not allowed."""
        config = worker.topics.config
        if not config.enabled:
            return _error(403, "Topic tracking is disabled.")
        if reset and not config.allow_reset:
            return _error(403, "Topic tracking reset is disabled.")
        return None

    @app.get("/connectors/{connector}/topics")
    def active_topics(connector: str):
        return _tracking() or worker.active_topics(connector)

    @app.put("/connectors/{connector}/topics/reset")
    def reset_active_topics(connector: str):
        refused = _tracking(reset=True)
        if refused is not None:
            return refused
        worker.reset_active_topics(connector)
        return Response(status_code=202)

    # ------------------------------------------------------------------------------- offsets
    @app.get("/connectors/{connector}/offsets")
    def get_offsets(connector: str):
        return worker.offsets(connector)

    @app.patch("/connectors/{connector}/offsets")
    def alter_offsets(connector: str, request: Any = body):
        offsets = request.get("offsets") if isinstance(request, dict) else None
        if not isinstance(offsets, list) or not offsets:
            raise BadRequestError("Partitions / offsets need to be provided for an alter offsets request")
        return {"message": worker.alter_offsets(connector, offsets)}

    @app.delete("/connectors/{connector}/offsets")
    def reset_offsets(connector: str):
        return {"message": worker.reset_offsets(connector)}

    # ------------------------------------------------------------------------------- plugins
    @app.get("/connector-plugins")
    def connector_plugins(connectorsOnly: str | None = None):
        return worker.connector_plugins(connectors_only=connectorsOnly is None or _flag(connectorsOnly))

    @app.get("/connector-plugins/{plugin}/config")
    def plugin_config(plugin: str):
        return worker.plugin_config(plugin)

    @app.put("/connector-plugins/{plugin}/config/validate")
    def validate(plugin: str, config: Any = body):
        config = _string_map(config, "config")
        included = config.get("connector.class")
        if included is not None and not _normalized_plugin(included).endswith(_normalized_plugin(plugin)):
            raise BadRequestError(f"Included connector type {included} does not match request type {plugin}")
        return worker.validate(plugin, config)

    return app


class RestServer:
    """uvicorn serving :func:`rest_app` in a background thread. ``host``/``port`` default to the
    worker config's ``listeners`` (``http://host:port``), else ``rest.host.name`` (else 127.0.0.1)
    and ``rest.port`` (else 8083); port 0 binds a free port, read back as :attr:`port` and
    :attr:`url` once :meth:`start` returns."""

    def __init__(self, worker, host: str | None = None, port: int | None = None,
                 health_check_timeout_ms: float = DEFAULT_HEALTH_CHECK_TIMEOUT_MS):
        listener = getattr(getattr(worker, "config", None), "rest_listener", None)
        if listener is None:      # a worker without a parsed WorkerConfig: its raw settings
            config = _worker_config(worker)
            listener = (config.get("rest.host.name"), config.get("rest.port", 8083))
        self.worker = worker
        self.health_check_timeout_ms = health_check_timeout_ms
        self.host = host or ("0.0.0.0" if listener[0] == "" else listener[0] or "127.0.0.1")
        self.port = int(port if port is not None else listener[1])
        self._server = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        return f"http://{host}:{self.port}"

    def start(self, timeout: float = 30.0) -> "RestServer":
        import time

        import uvicorn
        config = uvicorn.Config(rest_app(self.worker, self.health_check_timeout_ms), host=self.host, port=self.port, log_level="warning",
                                access_log=False, lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name=f"connect-rest-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive():
                raise OSError(f"the REST server could not listen on {self.host}:{self.port}; "
                              "is another process using that port (listeners, rest.port)?")
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(f"the REST server did not start on {self.host}:{self.port} in {timeout} s")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        bound = getattr(self.worker, "rest_bound", None)
        if callable(bound):
            bound(self.port)          # the worker id is the advertised host:port (Kafka's advertisedUrl)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
        self._server = self._thread = None

    def __enter__(self) -> "RestServer":
        return self.start() if self._server is None else self

    def __exit__(self, *exc) -> None:
        self.stop()


def _worker_config(worker) -> Mapping[str, Any]:
    """The worker's raw config, if it exposes one (``config.originals`` or ``worker_config``)."""
    for attr in ("worker_config", "config"):
        value = getattr(worker, attr, None)
        if isinstance(value, Mapping):
            return value
        originals = getattr(value, "originals", None)
        if isinstance(originals, Mapping):
            return originals
    return {}
