"""The seven steps of CALL-GATE-7, one module each, and the gate that runs them.

    propose → parse → validate → authorize → execute → reconcile → route

``gate.Gate`` reads the whole flow.
"""
