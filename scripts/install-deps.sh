#!/usr/bin/env bash
# Installs what `make test` needs on a fresh Debian machine: apt packages
# (only when missing) and npm packages from their lock files. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v node >/dev/null || need+=(nodejs)
command -v npm >/dev/null || need+=(npm)
# LibreOffice and openpyxl read exported workbooks back (functions/xlsx).
command -v soffice >/dev/null || need+=(libreoffice-calc)
/usr/bin/python3 -c 'import openpyxl' 2>/dev/null || need+=(python3-openpyxl)
# Debian's Chromium for the add-in's browser test (functions/bridge
# TestBrowserAddin); never a browser download.
[ -x /usr/bin/chromium ] || need+=(chromium)
# The desktop app: GTK and WebKitGTK headers for its cgo build (make app),
# Xvfb and ImageMagick's import for the window smoke test (app
# TestWindowSmoke), NSIS for the Windows installer (make dist).
dpkg -s libgtk-3-dev >/dev/null 2>&1 || need+=(libgtk-3-dev)
dpkg -s libwebkit2gtk-4.1-dev >/dev/null 2>&1 || need+=(libwebkit2gtk-4.1-dev)
command -v xvfb-run >/dev/null || need+=(xvfb)
command -v xauth >/dev/null || need+=(xauth)
[ -x /usr/bin/import ] || need+=(imagemagick)
# Ghostscript rasterises the PDF LibreOffice renders of exported charts
# (functions/xlsx TestChartRender).
command -v gs >/dev/null || need+=(ghostscript)
command -v makensis >/dev/null || need+=(nsis)
# PostgreSQL for the lake's catalog test (server/lake TestPostgresCatalog:
# a throwaway cluster on loopback).
[ -x /usr/lib/postgresql/15/bin/initdb ] || need+=(postgresql)
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "missing: ${need[*]}; install them with apt-get (needs root)" >&2
    exit 1
  fi
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi

# SeaweedFS's weed (S3 and an Iceberg REST catalog on loopback for the
# lake's tests, internal/testweed), built from its Go module.
bash scripts/install-weed.sh

# npm packages, exactly as locked.
for dir in localcache/format/interop functions/addin frontend; do
  if [ -f "$dir/package-lock.json" ]; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  fi
done
