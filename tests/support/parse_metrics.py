"""Parses metrics text on stdin with the Prometheus Python client's own
parser (argv[1]: openmetrics or prometheus) and prints the samples as JSON:
[{name, labels, value}], plus the family types. Exits 1 with the parser's
error when the text is not valid."""
import json
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_prometheus

text = sys.stdin.read()
parse = parse_openmetrics if sys.argv[1] == "openmetrics" else parse_prometheus
try:
    families = list(parse(text))
except Exception as e:  # the parser's own error, for the test's message
    print(f"{type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
print(json.dumps({
    "types": {f.name: f.type for f in families},
    "samples": [
        {"name": s.name, "labels": s.labels, "value": s.value}
        for f in families
        for s in f.samples
    ],
}))
