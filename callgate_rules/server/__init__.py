"""callgate as a service (``callgate serve``): the decision API for hosts in any language,
the review and confirmation page for people, and metrics, traces and logs for operators.

    from callgate_rules.server import ServiceSettings, create_app
    app = create_app(ServiceSettings(paths=("contracts", "policies"),
                                     store="postgresql://callgate@db/callgate"))
    # serve `app` with any ASGI server; `callgate serve` runs it under uvicorn

Modules: ``service`` (what an instance holds), ``api`` and ``models`` (``/v1``), ``page``
and ``templates/`` (``/review``), ``users`` (page logins and sessions), ``records``
(the look-ups' records from the request, the world file or the host's endpoint), ``metrics``
(``/metrics``), ``problems`` (problem details and request bounds), ``app`` (all of it).
Needs the ``server`` extra: ``pip install 'callgate-rules[server]'``.
"""

from callgate_rules.server.app import OPENAPI_URL, create_app
from callgate_rules.server.service import ServiceSettings

__all__ = ["OPENAPI_URL", "ServiceSettings", "create_app"]
