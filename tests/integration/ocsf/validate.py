"""Checks OCSF events against the field list derived from the OCSF schema (derive_fields.py):
every attribute the class or its objects define, of the type they give, with the class's and
objects' required attributes present (a profile's only when the event applies the profile), and
enum attributes holding one of their values. `unmapped` (type object) holds anything."""
import json
import pathlib

FIELDS = json.loads((pathlib.Path(__file__).parent / "http_activity-1.8.0.json").read_text())

SCALARS = {
    "integer_t": int, "long_t": int, "timestamp_t": int, "port_t": int,
    "float_t": (int, float), "boolean_t": bool, "json_t": object, "object": dict,
}


def _check_value(value, spec, where, problems, profiles):
    if spec.get("is_array"):
        if not isinstance(value, list):
            problems.append(f"{where}: not an array")
            return
        for i, item in enumerate(value):
            _check_value(item, {**spec, "is_array": False}, f"{where}[{i}]", problems, profiles)
        return
    kind = spec["type"]
    if kind in FIELDS["objects"]:
        _check_object(value, FIELDS["objects"][kind], where, problems, profiles)
        return
    expected = SCALARS.get(kind, str)  # string_t and its kinds (hostname_t, url_t, ...)
    if expected is int and isinstance(value, bool) or not isinstance(value, expected):
        problems.append(f"{where}: {value!r} is not {kind}")
        return
    if "enum" in spec and kind in ("integer_t", "string_t") and str(value) not in spec["enum"]:
        problems.append(f"{where}: {value!r} is not one of its enum values")


def _check_object(value, attributes, where, problems, profiles):
    if not isinstance(value, dict):
        problems.append(f"{where}: not an object")
        return
    for name, item in value.items():
        if name not in attributes:
            problems.append(f"{where}.{name}: not an attribute of the schema")
            continue
        _check_value(item, attributes[name], f"{where}.{name}", problems, profiles)
    for name, spec in attributes.items():
        applies = spec.get("profile") is None or spec["profile"] in profiles
        if spec["requirement"] == "required" and applies and name not in value:
            problems.append(f"{where}.{name}: required, missing")


def problems(event):
    """What is wrong with one event; [] when it validates."""
    found = []
    if event.get("class_uid") != FIELDS["class_uid"]:
        found.append(f"class_uid {event.get('class_uid')!r} is not {FIELDS['class_uid']}")
    if event.get("type_uid") != FIELDS["class_uid"] * 100 + event.get("activity_id", -1):
        found.append("type_uid is not class_uid * 100 + activity_id")
    profiles = set(event.get("metadata", {}).get("profiles", []))
    _check_object(event, FIELDS["attributes"], "event", found, profiles)
    return found
