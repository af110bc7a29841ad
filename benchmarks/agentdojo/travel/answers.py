"""What AgentDojo's travel tools answer, from the suite's environment (tasks.yaml).

Each answer is what the tool's public documentation and the suite's outputs show: a text
for the city listings and flights, a mapping of name to value for the per-name look-ups
(the harness dumps those as YAML, as AgentDojo does), a confirmation sentence for a
reservation, the created event or sent e-mail for the calendar and mail writes. Names
match exactly, as AgentDojo's look-ups do; the dietary look-up matches a name inside the
joined list of names asked for, as AgentDojo's does.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any


def _price(value: Any) -> str:
    """AgentDojo's prices are floats: 120 is shown as 120.0."""
    return str(float(value))


def _named(records: list[dict[str, Any]], names: Any, field: str | Callable[[dict[str, Any]],
           Any]) -> dict[str, Any]:
    wanted = names if isinstance(names, list) else [names]
    value = field if callable(field) else (lambda record: record[field])
    return {record["name"]: value(record) for record in records if record["name"] in wanted}


def _rating_and_reviews(record: dict[str, Any]) -> str:
    return f"Rating: {record['rating']}\nReviews: " + "\n".join(record["reviews"])


def _listing(title: str, records: list[dict[str, Any]], city: str) -> str:
    return title + "\n".join(record["name"] for record in records
                             if record["city"] == city) + "\n"


def _event(environment: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    calendar = environment["calendar"]
    participants = sorted(set(arguments.get("participants") or [])
                          | {calendar["account_email"]})
    return {
        "id_": str(max(int(event["id_"]) for event in calendar["events"]) + 1),
        "title": arguments.get("title", ""),
        "description": arguments.get("description", ""),
        "start_time": _minutes(arguments.get("start_time", "")),
        "end_time": _minutes(arguments.get("end_time", "")),
        "location": arguments.get("location"),
        "participants": participants,
        "all_day": False,
        "status": "confirmed",
    }


def _minutes(text: str) -> str:
    try:
        return datetime.strptime(text, "%Y-%m-%d %H:%M").isoformat()
    except ValueError:
        return text


def _email(environment: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    inbox = environment["inbox"]
    return {
        "id_": str(len(inbox["emails"])),
        "sender": inbox["account_email"],
        "recipients": arguments.get("recipients", []),
        "cc": arguments.get("cc") or [],
        "bcc": arguments.get("bcc") or [],
        "subject": arguments.get("subject", ""),
        "body": arguments.get("body", ""),
        "status": "sent",
        "read": False,
        "timestamp": environment["calendar"]["current_day"] + "T12:00:00",
        "attachments": arguments.get("attachments") or [],
    }


def _reserved(kind: str, arguments: dict[str, Any]) -> str:
    if kind == "hotel":
        return (f"Reservation for {arguments.get('hotel')} from {arguments.get('start_day')} "
                f"to {arguments.get('end_day')} has been made successfully.")
    if kind == "restaurant":
        try:
            start = datetime.strptime(arguments.get("start_time", ""), "%Y-%m-%d %H:%M")
        except ValueError:
            return f"Invalid start time {arguments.get('start_time')}."
        end = start + timedelta(hours=2)
        return (f"Reservation for {arguments.get('restaurant')} from {start:%H:%M} to "
                f"{end:%H:%M} on {start.date().isoformat()} has been made successfully.")
    return (f"Reservation for a car at {arguments.get('company')} from "
            f"{arguments.get('start_time')} to {arguments.get('end_time')} has been made "
            "successfully.")


def _flights(environment: dict[str, Any], arguments: dict[str, Any]) -> str:
    return "\n".join(
        f"Airline: {flight['airline']}, Flight Number: {flight['flight_number']}, Departure "
        f"Time: {flight['departure_time']}, Arrival Time: {flight['arrival_time']}, Price: "
        f"{flight['price']}, Contact Information: {flight['contact_information']}"
        for flight in environment["flights"]
        if flight["departure_city"] == arguments.get("departure_city")
        and flight["arrival_city"] == arguments.get("arrival_city"))


def _calendar_search(environment: dict[str, Any], arguments: dict[str, Any]) -> Any:
    query = str(arguments.get("query", "")).lower()
    date = arguments.get("date")
    found = [event for event in environment["calendar"]["events"]
             if (query in event["title"].lower() or query in event["description"].lower())
             and (not date or event["start_time"].startswith(date))]
    return found or "No events found. Try with a different query."


def _user(environment: dict[str, Any]) -> dict[str, str]:
    user = environment["user"]
    return {"First Name": user["first_name"], "Last Name": user["last_name"],
            "ID Number": user["ID_number"], "Email": user["email"],
            "Phone Number": user["phone_number"], "Address": user["address"],
            "Passport Number": user["passport_number"],
            "Bank Account Number": user["bank_account_number"],
            "Credit Card Number": user["credit_card_number"]}


def answers(environment: dict[str, Any], arguments: dict[str, Any]
            ) -> dict[str, Callable[[], Any]]:
    """Each travel tool, answering ``arguments`` from ``environment``."""
    hotels, restaurants = environment["hotels"], environment["restaurants"]
    cars, city = environment["car_rental"], arguments.get("city", "")
    hotel_names = arguments.get("hotel_names", [])
    restaurant_names = arguments.get("restaurant_names", [])
    companies = arguments.get("company_name", [])
    return {
        "get_user_information": lambda: _user(environment),
        "get_all_hotels_in_city": lambda: _listing("Hotel Names: ", hotels, city),
        "get_hotels_prices": lambda: _named(hotels, hotel_names, lambda h: (
            f"Price range: {_price(h['price_min'])} - {_price(h['price_max'])}")),
        "get_hotels_address": lambda: _named(hotels, arguments.get("hotel_name", ""),
                                             "address"),
        "get_rating_reviews_for_hotels": lambda: _named(hotels, hotel_names,
                                                        _rating_and_reviews),
        "get_all_restaurants_in_city": lambda: _listing(f"Restaurant in {city}: ",
                                                        restaurants, city),
        "get_restaurants_address": lambda: _named(restaurants, restaurant_names, "address"),
        "get_rating_reviews_for_restaurants": lambda: _named(restaurants, restaurant_names,
                                                             _rating_and_reviews),
        "get_cuisine_type_for_restaurants": lambda: _named(restaurants, restaurant_names,
                                                           "cuisine_type"),
        "get_dietary_restrictions_for_all_restaurants": lambda: {
            r["name"]: r["dietary_restrictions"] for r in restaurants
            if r["name"] in ", ".join(restaurant_names)},
        "get_contact_information_for_restaurants": lambda: _named(
            restaurants, restaurant_names, "contact_information"),
        "get_price_for_restaurants": lambda: _named(restaurants, restaurant_names,
                                                    "price_per_person"),
        "check_restaurant_opening_hours": lambda: _named(restaurants, restaurant_names,
                                                         "operating_hours"),
        "get_all_car_rental_companies_in_city": lambda: _listing(
            f"Car Rental Companies in {city}: ", cars, city),
        "get_car_types_available": lambda: _named(cars, companies, "car_types_available"),
        "get_rating_reviews_for_car_rental": lambda: _named(cars, companies,
                                                            _rating_and_reviews),
        "get_car_fuel_options": lambda: _named(cars, companies, "fuel_options"),
        "get_car_rental_address": lambda: _named(cars, companies, "address"),
        "get_car_price_per_day": lambda: _named(cars, companies,
                                                lambda c: float(c["price_per_day"])),
        "get_flight_information": lambda: _flights(environment, arguments),
        "search_calendar_events": lambda: _calendar_search(environment, arguments),
        "get_day_calendar_events": lambda: [
            event for event in environment["calendar"]["events"]
            if event["start_time"].startswith(str(arguments.get("day", "")))],
        "create_calendar_event": lambda: _event(environment, arguments),
        "cancel_calendar_event": lambda: (
            f"Event with ID {arguments.get('event_id')} has been canceled and participants "
            "have been notified."),
        "send_email": lambda: _email(environment, arguments),
        "reserve_hotel": lambda: _reserved("hotel", arguments),
        "reserve_restaurant": lambda: _reserved("restaurant", arguments),
        "reserve_car_rental": lambda: _reserved("car", arguments),
    }
