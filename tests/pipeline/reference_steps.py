"""Steps 3–4 as a plain, slow reference evaluator, written check by check.

The gate compiles each tool's steps 3–4 into one generated function (its plan,
``callgate_rules.pipeline.plan``). This module decides the same calls the obvious way: the
argument schema by jsonschema itself, every CEL expression through its function (never
inlined), the look-ups, rules and modes in loops over the documents. It shares with the
plan only what each check *says* when it does not pass (the rejections, trace entries and
shadow verdicts of ``validate`` and ``authorize``), never the control flow. ``test_plan``
decides every call both ways and compares the decisions field by field, as OPA holds its
evaluators to one corpus of cases.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from callgate_rules import provenance
from callgate_rules.cel.errors import CelEvaluationError
from callgate_rules.documents.model import AccessPolicies, AccessRule
from callgate_rules.pipeline import authorize, lookups, validate
from callgate_rules.pipeline.argument_origins import traced_sources
from callgate_rules.pipeline.decision import RawTraceEntry, ShadowVerdict
from callgate_rules.pipeline.outcome import Rejection
from callgate_rules.pipeline.plan import ToolPlan
from callgate_rules.pipeline.progress import Progress
from callgate_rules.taxonomy import ErrorClass


class ReferenceSteps:
    """Steps 3–4 of one tool, decided plainly; called as a plan's ``decide`` is."""

    def __init__(self, plan: ToolPlan, policies: AccessPolicies,
                 thresholds: provenance.Thresholds) -> None:
        self.plan, self.policies, self.thresholds = plan, policies, thresholds

    def __call__(self, arguments: Any, actor: Mapping[str, Any], now: datetime,
                 resolvers: Mapping[str, Any], progress: Progress) -> str | Rejection:
        session, conversation = progress.session, progress.conversation
        variables, trace, shadow = progress.variables, progress.trace, progress.shadow
        contract = self.plan.contract
        rejection = validate.schema_rejection(contract, arguments, trace)
        if rejection is not None:
            return rejection
        trace.append(validate.SCHEMA_PASSED)
        for name, validator, value in (("actor", self.policies.actor_validator, actor),
                                       ("session", self.policies.session_validator, session)):
            if validator is not None:
                rejection = authorize.host_fact_rejection(validator, value, name,
                                                          f"{name}-schema")
                if rejection is not None:
                    return rejection
        # JSON numbers as their schemas type them, as the plan does (cel.json_numbers)
        if contract.number_typing is not None:
            arguments = contract.number_typing(arguments)
        if self.policies.actor_typing is not None:
            actor = self.policies.actor_typing(actor)
        if self.policies.session_typing is not None:
            session = self.policies.session_typing(session)
        variables.update(args=arguments, actor=actor, now=now, tool=contract.name,
                         session=session)
        rejection = self.references(resolvers, variables, trace)
        if rejection is not None:
            return rejection
        if conversation is not None:
            variables["provenance"] = traced_sources(arguments, conversation, contract,
                                                     variables, self.thresholds, trace)
        elif self.plan.reads_provenance:
            variables["provenance"] = provenance.unknown_sources(arguments)
        permit = self.authorized(variables, trace, shadow)
        if not isinstance(permit, str):
            return permit
        return self.business_rules(variables, trace, shadow) or permit

    def references(self, resolvers: Mapping[str, Any], variables: dict[str, Any],
                   trace: list[RawTraceEntry]) -> Rejection | None:
        contract = self.plan.contract
        started = time.perf_counter()
        rejection = self.each_reference(resolvers, variables, trace)
        elapsed = time.perf_counter() - started
        if rejection is None and contract.lookups and elapsed > contract.timeout_seconds:
            return validate.too_slow(contract, elapsed)
        return rejection

    def each_reference(self, resolvers: Mapping[str, Any], variables: dict[str, Any],
                       trace: list[RawTraceEntry]) -> Rejection | None:
        contract = self.plan.contract
        for lookup in contract.lookups:
            if lookup.when is not None and not _holds(lookup.when, variables):
                variables[lookup.name] = None
                trace.append(validate.skipped(lookup))
                continue
            try:
                key = lookup.key.evaluate(variables)
            except CelEvaluationError as error:
                return validate.key_rejection(contract, lookup, error, self.plan.example)
            resolver = resolvers.get(lookup.collection)
            if resolver is None:
                raise validate.no_resolver(contract, lookup)
            try:
                found = validate.records_of(lookups.resolve(resolver, lookup.fields, key))
            except Exception as error:
                return validate.resolver_failed(contract, lookup, error)
            if lookup.number_typing is not None:
                found = [lookup.number_typing(record) for record in found]
            if lookup.visible is not None:
                found = validate.visible_records(lookup, found, variables, trace)
            found = validate.candidates(lookup, found, variables, self.plan.may_see, trace)
            if lookup.many == "list" and (lookup.max_records is None
                                          or len(found) <= lookup.max_records):
                variables[lookup.name] = found
                trace.append(validate.listed_entry(lookup, found))
                continue
            if len(found) != 1:
                return validate.unmatched(contract, lookup, key, found, variables, trace)
            variables[lookup.name] = found[0]
            trace.append(validate.found_entry(lookup, found[0]))
        return None

    def authorized(self, variables: Mapping[str, Any], trace: list[RawTraceEntry],
                   shadow: list[ShadowVerdict]) -> str | Rejection:
        contract, rules = self.plan.contract, self.plan.rules
        for rule in rules.denies:
            if _matches(rule, variables, trace, shadow):
                return authorize.denial(contract, rule, (rule,), variables)
        for rule in rules.allows:
            if _matches(rule, variables, trace, shadow):
                return rule.qualified_name
        trace.append(authorize.DEFAULT_DENY)
        return authorize.denial(contract, None, rules.allows, variables)

    def business_rules(self, variables: Mapping[str, Any], trace: list[RawTraceEntry],
                       shadow: list[ShadowVerdict]) -> Rejection | None:
        contract = self.plan.contract
        needs_confirmation: list[Rejection] = []
        for rule in contract.rules:
            try:
                value = rule.expression.evaluate(variables)
            except CelEvaluationError as error:
                value = error
            if value is True:
                trace.append(rule.passed)
                continue
            rejection = validate.rule_outcome(contract, rule, value, variables, trace, shadow,
                                              example=self.plan.example)
            if rejection is None:
                continue
            if rule.error_class != ErrorClass.CONFIRMATION_REQUIRED:
                return rejection
            needs_confirmation.append(rejection)
        return needs_confirmation[0] if needs_confirmation else None


def _holds(expression: Any, variables: Mapping[str, Any]) -> bool:
    try:
        return expression.evaluate(variables) is True
    except CelEvaluationError:
        return False


def _matches(rule: AccessRule, variables: Mapping[str, Any], trace: list[RawTraceEntry],
             shadow: list[ShadowVerdict]) -> bool:
    try:
        value = rule.when.evaluate(variables)
    except CelEvaluationError as error:
        value = error
    return authorize.access_verdict(rule, value, trace, shadow)
