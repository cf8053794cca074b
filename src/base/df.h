/*
 * df — parses POSIX `df -kP` / `df -iP` output, the statfs answer of the
 * remote providers (they run `df -kP P; df -iP P` in the sandbox).
 */
#ifndef SBX_DF_H
#define SBX_DF_H

#include <sys/statvfs.h>

/*
 * Fills st from the tables in text: each header line starting
 * "Filesystem" is followed by one data row whose last five columns are
 * total, used, available, capacity and mount point (the device name may
 * hold spaces). A header naming "Inodes" gives f_files/f_ffree, any other
 * the 1024-byte blocks. Block size 1024, f_namemax 255. -EPROTO when no
 * block table parses.
 */
int sbx_df_parse(const char *text, struct statvfs *st);

#endif
