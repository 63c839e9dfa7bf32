// SPDX-License-Identifier: MIT
/*
 * Copyright (c) 2026 gdrcopy-ansible contributors
 *
 * TEST-ONLY stand-in for nvidia-peermem.ko (module name nvidia_peermem).
 *
 * It registers nothing with ib_core; it only uses one nvidia_p2p_* symbol so
 * that depmod records a dependency on the (stand-in) nvidia module and
 * `modprobe nvidia-peermem` loads nvidia first, as with the real module.
 * Never install it on a real machine; no role of this project does.
 */
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/printk.h>
#include <linux/types.h>

#include "nv-p2p.h"

#ifndef STANDIN_NV_VERSION
#error "STANDIN_NV_VERSION is not set: build with the Makefile in this folder"
#endif
#ifndef STANDIN_PEERMEM_LICENSE
#error "STANDIN_PEERMEM_LICENSE is not set: build with the Makefile in this folder"
#endif

/* Same name, type and permissions as the real module's parameter. */
static int peerdirect_support;
module_param(peerdirect_support, int, 0444);
MODULE_PARM_DESC(peerdirect_support, "Accepted and ignored (stand-in)");

static int __init standin_peermem_init(void)
{
	/* A real reference, so modpost and depmod see the import. */
	void *get_pages = (void *)nvidia_p2p_get_pages;

	pr_info("nvidia_peermem: test-only stand-in %s loaded (nvidia_p2p_get_pages at %p)\n",
		STANDIN_NV_VERSION, get_pages);
	return 0;
}

static void __exit standin_peermem_exit(void)
{
}

module_init(standin_peermem_init);
module_exit(standin_peermem_exit);

MODULE_DESCRIPTION("TEST-ONLY stand-in for nvidia-peermem: no peer memory, no GPU support");
MODULE_AUTHOR("gdrcopy-ansible contributors");
MODULE_VERSION(STANDIN_NV_VERSION);
MODULE_LICENSE(STANDIN_PEERMEM_LICENSE);
