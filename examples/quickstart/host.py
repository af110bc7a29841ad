"""The 60-second example: a model proposes a refund; the gate decides and executes it once."""
from pathlib import Path

from callgate_rules import Gate, open_store

HERE = Path(__file__).parent
ORDERS = [{"id": "O-1001", "shop": "north", "total": 80.0}]


def refund(request):  # your real API call; pass request.operation_id as its idempotency key
    return {"refunded": request.arguments["amount"], "operation": request.operation_id}


gate = Gate.from_paths(
    HERE / "contracts", HERE / "policies",
    resolvers={"orders": lambda field, value: [o for o in ORDERS if o[field] == value]},
    executors={"issueRefund": refund},
    store=open_store("memory:"),  # sqlite:///receipts.sqlite3 or postgresql://... in production
)
agent = {"id": "U-7", "shop": "north", "role": "agent"}  # from your session, never the model
for amount in (20, 95):
    model_output = {"name": "issueRefund", "arguments": {"orderId": "O-1001", "amount": amount}}
    decision = gate.handle(model_output, actor=agent, request_id=f"req-{amount}")
    print(decision.route, "|", decision.agent_message)
