#!/bin/bash
# fs/ write-back on the e2b provider against the fake E2B (lib-writeback.sh).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/lib-fake.sh"
. "$(dirname "$0")/lib-writeback.sh"
start_fake e2b
UPLOAD_KEY="POST /files"
COMMAND_KEY="POST /process.Process/Start"
MKDIR_KEY="POST /filesystem.Filesystem/MakeDir"
HOME_DIR=/home/user
story_writeback
story_writeback_batch
finish
