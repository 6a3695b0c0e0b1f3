"""Checks OCSF events against the field lists derived from the OCSF schema (derive_fields.py), of
HTTP Activity (every exchange) and API Activity (an MCP call): every attribute the class or its
objects define, of the type they give, with the class's and
objects' required attributes present (a profile's only when the event applies the profile), and
enum attributes holding one of their values. `unmapped` (type object) holds anything."""
import json
import pathlib

# class_uid -> its field list.
CLASSES = {}
for name in ("http_activity-1.8.0.json", "api_activity-1.8.0.json"):
    fields = json.loads((pathlib.Path(__file__).parent / name).read_text())
    CLASSES[fields["class_uid"]] = fields

SCALARS = {
    "integer_t": int, "long_t": int, "timestamp_t": int, "port_t": int,
    "float_t": (int, float), "boolean_t": bool, "json_t": object, "object": dict,
}


def _check_value(value, spec, where, problems, profiles, schema):
    if spec.get("is_array"):
        if not isinstance(value, list):
            problems.append(f"{where}: not an array")
            return
        for i, item in enumerate(value):
            _check_value(item, {**spec, "is_array": False}, f"{where}[{i}]", problems, profiles,
                         schema)
        return
    kind = spec["type"]
    if kind in schema["objects"]:
        _check_object(value, schema["objects"][kind], where, problems, profiles, schema)
        return
    expected = SCALARS.get(kind, str)  # string_t and its kinds (hostname_t, url_t, ...)
    if expected is int and isinstance(value, bool) or not isinstance(value, expected):
        problems.append(f"{where}: {value!r} is not {kind}")
        return
    if "enum" in spec and kind in ("integer_t", "string_t") and str(value) not in spec["enum"]:
        problems.append(f"{where}: {value!r} is not one of its enum values")


def _check_object(value, attributes, where, problems, profiles, schema):
    if not isinstance(value, dict):
        problems.append(f"{where}: not an object")
        return
    for name, item in value.items():
        if name not in attributes:
            problems.append(f"{where}.{name}: not an attribute of the schema")
            continue
        _check_value(item, attributes[name], f"{where}.{name}", problems, profiles, schema)
    for name, spec in attributes.items():
        applies = spec.get("profile") is None or spec["profile"] in profiles
        if spec["requirement"] == "required" and applies and name not in value:
            problems.append(f"{where}.{name}: required, missing")


def problems(event):
    """What is wrong with one event; [] when it validates."""
    found = []
    schema = CLASSES.get(event.get("class_uid"))
    if schema is None:
        return [f"class_uid {event.get('class_uid')!r} is not one of {sorted(CLASSES)}"]
    if event.get("type_uid") != schema["class_uid"] * 100 + event.get("activity_id", -1):
        found.append("type_uid is not class_uid * 100 + activity_id")
    profiles = set(event.get("metadata", {}).get("profiles", []))
    _check_object(event, schema["attributes"], "event", found, profiles, schema)
    return found
