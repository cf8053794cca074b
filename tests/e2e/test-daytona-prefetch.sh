#!/bin/bash
# Reads in bulk on the daytona provider against the fake Daytona (lib-prefetch.sh):
# grep -r at most 0.2 request per file, a changed file read new, a file
# over the cap, an odd name, a file gone from the batch; a big file read
# as it arrives, its far parts by ranges (the raw download).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-prefetch.sh"
start_fake daytona
DOWNLOAD_KEYS=('POST /toolbox/:id/files/bulk-download')
BATCH_KEY='POST /toolbox/:id/files/bulk-download'
LINKS_KEY='POST /toolbox/:id/process/execute' # the links of a directory: one command
story_prefetch
STREAM_KEY='POST /toolbox/:id/files/bulk-download' STREAM_RANGE=1 story_stream_big
finish
