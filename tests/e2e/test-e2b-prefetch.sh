#!/bin/bash
# Reads in bulk on the e2b provider against the fake E2B (lib-prefetch.sh):
# grep -r at most 0.2 request per file, a changed file read new, a file
# over the cap, an odd name, a file gone from the batch; a big file read
# as it arrives, its far parts by ranges.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-prefetch.sh"
start_fake e2b
DOWNLOAD_KEYS=("GET /files" "POST /process.Process/Start")
BATCH_KEY='POST /process.Process/Start'
LINKS_KEY='POST /process.Process/Start' # the links of a directory: one command
story_prefetch
STREAM_KEY='GET /files' STREAM_RANGE=1 story_stream_big
finish
