"""Reading what a page's Altair chart draws, in AppTest: Streamlit moves a chart's data out of the
Vega-Lite spec into Arrow datasets beside it."""

from __future__ import annotations

import json

import pyarrow as pa


def chart_rows(chart) -> list[dict]:
    """The rows of an AppTest ``vega_lite_chart`` element's (first) dataset."""
    spec = json.loads(chart.proto.spec)
    if "datasets" in spec:
        return spec["datasets"][spec["data"]["name"]]
    data = chart.proto.datasets[0].data.data
    return pa.ipc.open_stream(data).read_all().to_pandas().to_dict("records")


def dataset_rows(chart) -> list[dict]:
    """The rows of every dataset of an AppTest ``vega_lite_chart`` element, one list (a layered
    chart's layers each have their own)."""
    spec = json.loads(chart.proto.spec)
    rows = [r for d in spec.get("datasets", {}).values() for r in d]
    for d in chart.proto.datasets:
        rows += pa.ipc.open_stream(d.data.data).read_all().to_pandas().to_dict("records")
    return rows
