"""Print what openpyxl (and the raw package) see in an exported workbook, as JSON.

Run by the Go tests of functions/xlsx: python3 inspect_xlsx.py FILE.xlsx
Needs openpyxl (Debian: python3-openpyxl). The Go side checks the output.
"""
import datetime
import json
import re
import sys
import zipfile

import openpyxl


def cell_json(v):
    if isinstance(v, datetime.datetime):
        if v.hour or v.minute or v.second:
            return v.strftime("%Y-%m-%dT%H:%M")
        return v.strftime("%Y-%m-%d")
    if isinstance(v, (int, float, str, bool)) or v is None:
        return v
    # openpyxl 3.1 reads an array formula as an ArrayFormula object.
    text = getattr(v, "text", None)
    if text is not None:
        return {"array_formula": text, "ref": getattr(v, "ref", None)}
    return repr(v)


def chart_json(chart):
    out = {"type": chart.tagname, "series": []}
    for s in chart.series:
        ref = {}
        if s.val is not None and s.val.numRef is not None:
            ref["values"] = s.val.numRef.f
        if s.cat is not None:
            if s.cat.numRef is not None:
                ref["categories"] = s.cat.numRef.f
            elif s.cat.strRef is not None:
                ref["categories"] = s.cat.strRef.f
        if s.tx is not None and s.tx.strRef is not None:
            ref["name"] = s.tx.strRef.f
        out["series"].append(ref)
    return out


def sheet_rows(ws, limit):
    rows = []
    for row in ws.iter_rows(max_row=min(limit, ws.max_row)):
        rows.append([cell_json(c.value) for c in row])
    return rows


def main(path):
    out = {}
    wb = openpyxl.load_workbook(path)  # formulas as written
    cached = openpyxl.load_workbook(path, data_only=True)  # their cached results
    out["sheets"] = wb.sheetnames
    out["charts"] = []
    for name in wb.sheetnames:
        ws = wb[name]
        for c in getattr(ws, "_charts", []):
            d = chart_json(c)
            d["sheet"] = name
            out["charts"].append(d)
    data = wb["Data"]
    out["tables"] = [{"name": t.name, "ref": t.ref, "columns": [c.name for c in t.tableColumns]}
                     for t in data.tables.values()]
    out["freeze_panes"] = data.freeze_panes
    out["max_row"] = data.max_row
    out["max_column"] = data.max_column
    out["date_formats"] = sorted({data.cell(row=r, column=1).number_format
                                  for r in range(2, data.max_row + 1)})
    out["date_is_date"] = all(data.cell(row=r, column=1).is_date for r in range(2, data.max_row + 1))
    out["data"] = sheet_rows(cached["Data"], 10_000)
    out["a2"] = cell_json(data["A2"].value)
    out["info"] = sheet_rows(wb["Info"], 2_000)

    # What openpyxl does not model: dynamic array metadata and calc properties.
    with zipfile.ZipFile(path) as z:
        names = z.namelist()
        out["parts"] = sorted(names)
        sheet = z.read("xl/worksheets/sheet1.xml").decode()
        m = re.search(r'<c r="A2"[^>]*>(<f[^>]*>)', sheet)
        out["a2_raw"] = m.group(0) if m else None
        out["metadata"] = z.read("xl/metadata.xml").decode() if "xl/metadata.xml" in names else None
        wbxml = z.read("xl/workbook.xml").decode()
        m = re.search(r"<calcPr[^>]*>", wbxml)
        out["calc_pr"] = m.group(0) if m else None
        out["content_types_metadata"] = "/xl/metadata.xml" in z.read("[Content_Types].xml").decode()
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
