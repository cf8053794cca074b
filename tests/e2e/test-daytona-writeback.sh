#!/bin/bash
# fs/ write-back on the daytona provider against the fake Daytona (lib-writeback.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-writeback.sh"
start_fake daytona
UPLOAD_KEY="POST /toolbox/:id/files/bulk-upload"
COMMAND_KEY="POST /toolbox/:id/process/execute"
MKDIR_KEY="POST /toolbox/:id/files/folder"
HOME_DIR=/home/daytona
story_writeback
story_writeback_batch
finish
