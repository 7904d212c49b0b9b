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
