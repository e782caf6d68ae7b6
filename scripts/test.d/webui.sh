#!/usr/bin/env bash
# The web app (issue 35) in a real browser: Debian's chromium, headless, driven by chromedriver and
# selenium (scripts/test installs them), with its security rules tried from outside it. The
# browser's side is webui.py; this script makes the second local user and cleans up.
PG_PRIVATE_MOUNTS=1
source "$(dirname "$0")/lib.sh"
need_fuse
for tool in /usr/bin/chromium /usr/bin/chromedriver convert exiftool identify curl; do
    command -v "$tool" >/dev/null || skip "$tool is missing (scripts/test installs chromium, chromium-driver, python3-selenium)"
done
/usr/bin/python3 -c 'import selenium, PIL' 2>/dev/null || skip "python3-selenium or python3-pil is missing"
second_user pgweb
shot="${PHOTOGATE_WEBUI_SCREENSHOT:-$tmp/picker.png}"
/usr/bin/python3 "$(dirname "$0")/webui.py" "$tmp" "$PHOTOGATE_BIN" "$user" "$shot" || fail "see above"
say "passed"
