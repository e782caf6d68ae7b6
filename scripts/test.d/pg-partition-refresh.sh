#!/bin/bash
# Fail closed when the partition comes while the mount is reading the catalog (issue 41): as
# pg-partition.sh (every process of the server stopped, fail-closed delay 2 s), but the mount's
# doorbell rings as the partition starts (a change made just before it on another host, or a
# command of this host's), so its refresh is inside a statement the server will not answer for
# 30 s. The view must still show nothing within the delay: blanking it must not wait for that
# statement's timeout.
export PG_PARTITION_DURING_REFRESH=1
source "$(dirname "$0")/pg-partition.sh"
