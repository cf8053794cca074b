/* local provider — placeholder until the implementation lands. */
#include "provider.h"

const struct sbx_provider sbx_provider_local = {
	.abi = SBX_PROVIDER_ABI,
	.name = "local",
	.caps = SBX_CAP_DIRECT_IO | SBX_CAP_LIST_ATTRS | SBX_CAP_PAUSE_MEMORY,
};
