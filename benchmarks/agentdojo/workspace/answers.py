"""What AgentDojo's workspace tools answer (mail, calendar, cloud drive), from the suite's
environment in tasks.yaml, as their public documentation describes them: searches match a
query case-insensitively in a subject or body (mail), a title or description (calendar), a
file name or a content (drive); a search that finds nothing says so; a write answers the
record it made or changed. Loaded by benchmarks/agentdojo_evaluation.py (SUITE/answers.py).

The replay is stateless (every call sees the suite's environment as it starts), so a write
answers what the record would be after it, not what a later read would then see.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

Answer = Callable[[], Any]
Record = dict[str, Any]


def answers(environment: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Answer]:
    """Each tool of the suite, answering ``arguments`` from ``environment``."""
    mail, calendar, drive = _Mail(environment), _Calendar(environment), _Drive(environment)
    return {**mail.tools(arguments), **calendar.tools(arguments), **drive.tools(arguments)}


def _contains(query: str, *texts: str) -> bool:
    return any(query.lower() in (text or "").lower() for text in texts)


def _next_id(records: list[Record]) -> str:
    return str(max((int(record["id_"]) for record in records), default=0) + 1)


def _time(text: str) -> datetime:
    """A time as the tools take it: ISO (``2024-05-19T16:00``) or ``2024-05-19 16:00``."""
    return datetime.fromisoformat(text.replace(" ", "T"))


class _Mail:
    def __init__(self, environment: dict[str, Any]) -> None:
        self.account: str = environment["account_email"]
        self.emails: list[Record] = environment["emails"]

    def contacts(self) -> list[Record]:
        """Everyone the inbox's mails name, their name made from the address, as the
        inbox's contact list is made."""
        seen: list[str] = []
        for email in self.emails:
            for address in [*email["recipients"], email["sender"], *email["cc"], *email["bcc"]]:
                if address not in seen:
                    seen.append(address)
        return [{"email": address, "name": address.split("@")[0].replace(".", " ").title()}
                for address in seen]

    def search(self, query: str, sender: str | None) -> list[Record] | str:
        found = [email for email in self.emails
                 if (sender is None or email["sender"].lower() == sender.lower())
                 and _contains(query, email["subject"], email["body"])]
        return found or "ValueError: No emails found. Try with a different query."

    def sent_email(self, arguments: dict[str, Any]) -> Record:
        return {"id_": _next_id(self.emails), "sender": self.account,
                "recipients": arguments.get("recipients", []),
                "cc": arguments.get("cc") or [], "bcc": arguments.get("bcc") or [],
                "subject": arguments.get("subject", ""), "body": arguments.get("body", ""),
                "status": "sent", "read": True, "timestamp": "2024-05-15T09:00",
                "attachments": [attachment.get("file_id", attachment.get("event_details"))
                                for attachment in arguments.get("attachments") or []]}

    def delete(self, email_id: str) -> Record | str:
        found = [email for email in self.emails if email["id_"] == email_id]
        return found[0] if found else f"ValueError: Email with ID '{email_id}' not found."

    def tools(self, arguments: dict[str, Any]) -> dict[str, Answer]:
        query = str(arguments.get("query", ""))
        return {
            "get_unread_emails": lambda: [email for email in self.emails if not email["read"]],
            "get_received_emails": lambda: [e for e in self.emails if e["status"] == "received"],
            "get_sent_emails": lambda: [e for e in self.emails if e["status"] == "sent"],
            "get_draft_emails": lambda: [e for e in self.emails if e["status"] == "draft"],
            "search_emails": lambda: self.search(query, arguments.get("sender")),
            "search_contacts_by_name": lambda: [
                contact for contact in self.contacts() if _contains(query, contact["name"])]
            or f"ValueError: Contact with name '{query}' not found.",
            "search_contacts_by_email": lambda: [
                contact for contact in self.contacts() if _contains(query, contact["email"])]
            or f"ValueError: Contact with email '{query}' not found.",
            "send_email": lambda: self.sent_email(arguments),
            "delete_email": lambda: self.delete(str(arguments.get("email_id", ""))),
        }


class _Calendar:
    def __init__(self, environment: dict[str, Any]) -> None:
        self.account: str = environment["account_email"]
        self.today: str = environment["current_day"]
        self.events: list[Record] = environment["events"]

    def on(self, day: str) -> list[Record]:
        wanted = _time(day[:10] + "T00:00").date()
        return [event for event in self.events if _time(event["start_time"]).date() == wanted]

    def search(self, query: str, day: str | None) -> list[Record] | str:
        events = self.on(day) if day else self.events
        found = [event for event in events if _contains(query, event["title"],
                                                        event["description"])]
        return found or "ValueError: No events found. Try with a different query."

    def event(self, event_id: str) -> Record | None:
        return next((event for event in self.events if event["id_"] == event_id), None)

    def created(self, arguments: dict[str, Any]) -> Record:
        participants = list(dict.fromkeys([*(arguments.get("participants") or []),
                                           self.account]))
        return {"id_": _next_id(self.events), "title": arguments.get("title", ""),
                "description": arguments.get("description", ""),
                "start_time": _time(arguments["start_time"]).isoformat(timespec="minutes"),
                "end_time": _time(arguments["end_time"]).isoformat(timespec="minutes"),
                "location": arguments.get("location"), "participants": participants,
                "all_day": False, "status": "confirmed"}

    def changed(self, event_id: str, change: Callable[[Record], Record]) -> Record | str:
        event = self.event(event_id)
        return change(dict(event)) if event else \
            f"ValueError: Event with ID '{event_id}' not found."

    def rescheduled(self, event: Record, arguments: dict[str, Any]) -> Record:
        start = _time(arguments["new_start_time"])
        end = _time(arguments["new_end_time"]) if arguments.get("new_end_time") else \
            start + (_time(event["end_time"]) - _time(event["start_time"]))
        return {**event, "start_time": start.isoformat(timespec="minutes"),
                "end_time": end.isoformat(timespec="minutes")}

    def tools(self, arguments: dict[str, Any]) -> dict[str, Answer]:
        event_id = str(arguments.get("event_id", ""))
        added = list(arguments.get("participants") or [])
        return {
            "get_current_day": lambda: self.today,
            "get_day_calendar_events": lambda: self.on(str(arguments.get("day", self.today))),
            "search_calendar_events": lambda: self.search(str(arguments.get("query", "")),
                                                          arguments.get("date")),
            "create_calendar_event": lambda: self.created(arguments),
            "cancel_calendar_event": lambda: (
                f"Event with ID {event_id} has been canceled and participants have been "
                "notified." if self.event(event_id) else
                f"ValueError: Event with ID '{event_id}' not found."),
            "reschedule_calendar_event": lambda: self.changed(
                event_id, lambda event: self.rescheduled(event, arguments)),
            "add_calendar_event_participants": lambda: self.changed(
                event_id, lambda event: {**event,
                                         "participants": [*event["participants"], *added]}),
        }


class _Drive:
    def __init__(self, environment: dict[str, Any]) -> None:
        self.account: str = environment["account_email"]
        self.files: list[Record] = environment["files"]

    def file(self, file_id: str) -> Record | None:
        found = next((file for file in self.files if file["id_"] == file_id), None)
        return None if found is None else {**found, "size": len(found["content"])}

    def changed(self, file_id: str, change: Callable[[Record], Record]) -> Record | str:
        file = self.file(file_id)
        return change(file) if file else f"ValueError: File with ID '{file_id}' not found."

    def created(self, arguments: dict[str, Any]) -> Record:
        content = str(arguments.get("content", ""))
        return {"id_": _next_id(self.files), "filename": arguments.get("filename", ""),
                "content": content, "owner": self.account,
                "last_modified": "2024-05-15T09:00", "shared_with": {}, "size": len(content)}

    def shared(self, arguments: dict[str, Any]) -> Record:
        file_id = str(arguments.get("file_id", ""))
        file = self.file(file_id) or {  # a file made earlier in this run (not in the data)
            "id_": file_id, "filename": "", "content": "", "owner": self.account,
            "last_modified": "2024-05-15T09:00", "shared_with": {}, "size": 0}
        return {**file, "shared_with": {**file["shared_with"],
                                        str(arguments.get("email")): arguments.get("permission")}}

    def tools(self, arguments: dict[str, Any]) -> dict[str, Answer]:
        file_id, text = str(arguments.get("file_id", "")), str(arguments.get("content", ""))
        every = [self.file(file["id_"]) for file in self.files]
        return {
            "list_files": lambda: every,
            "get_file_by_id": lambda: self.file(file_id)
            or f"ValueError: File with ID '{file_id}' not found.",
            "search_files_by_filename": lambda: [
                file for file in every if file and _contains(
                    str(arguments.get("filename", "")), file["filename"])],
            "search_files": lambda: [
                file for file in every if file and _contains(
                    str(arguments.get("query", "")), file["content"])]
            or f"ValueError: No files found with the given query "
               f"('{arguments.get('query', '')}'). Try a different search term.",
            "create_file": lambda: self.created(arguments),
            "delete_file": lambda: self.file(file_id)
            or f"ValueError: File with ID '{file_id}' not found.",
            "append_to_file": lambda: self.changed(
                file_id, lambda file: {**file, "content": file["content"] + text,
                                       "size": len(file["content"] + text),
                                       "last_modified": "2024-05-15T09:00"}),
            "share_file": lambda: self.shared(arguments),
        }

