// SPDX-License-Identifier: MIT
/*
 * Copyright (c) 2026 gdrcopy-ansible contributors
 *
 * TEST-ONLY stand-in for the NVIDIA kernel module (nvidia.ko).
 *
 * It exists so that the module chain nvidia -> gdrdrv can be loaded in a
 * virtual machine that has no GPU.  It exports every function declared by
 * the real NVIDIA source's nv-p2p.h (compiled against that very header, so
 * that under CONFIG_MODVERSIONS the symbol CRCs are those of a real nvidia.ko
 * built from the same source), carries the version and license of that
 * source, and shows /proc/driver/nvidia/version.  Nothing here drives a GPU:
 * every call that would pin or map GPU memory fails.  Never install it on a
 * real machine; no role of this project does.
 */

/*
 * Kernel headers, in this order, before nv-p2p.h.
 *
 * genksyms computes a symbol's CRC from the full expansion of every type in
 * its prototype, and several nv-p2p.h prototypes reach struct pci_dev and,
 * through it, much of the driver model.  A struct that is only declared in
 * this file but defined in NVIDIA's nv-p2p.c (or the other way round) would
 * give a different CRC.  This list makes the same definitions visible as the
 * real translation unit sees on Linux 6.1 with NVIDIA 535 (checked by
 * comparing against `#SYMVER` lines of a real nv-p2p.o; see README.md).
 */
#include <linux/types.h>
#include <linux/stddef.h>
#include <linux/spinlock.h>
#include <linux/rwsem.h>
#include <linux/sched.h>
#include <linux/semaphore.h>
#include <linux/sched/signal.h>
#include <linux/mm.h>
#include <linux/delay.h>
#include <linux/interrupt.h>
#include <linux/utsname.h>
#include <linux/module.h>
#include <linux/ctype.h>
#include <linux/console.h>
#include <linux/cpufreq.h>
#include <linux/vmalloc.h>
#include <linux/poll.h>
#if __has_include(<linux/dma-buf.h>)
#include <linux/dma-buf.h>
#endif
#include <asm/tlbflush.h>
#include <linux/pci.h>
#include <linux/pm_runtime.h>
#include <linux/fdtable.h>
#include <linux/vgaarb.h>
#include <linux/pagemap.h>
#if __has_include(<linux/dma-map-ops.h>)
#include <linux/dma-map-ops.h>
#endif
#include <linux/memory.h>
#include <linux/efi.h>
#include <linux/fb.h>
#if __has_include(<linux/reset.h>)
#include <linux/reset.h>
#endif
#if __has_include(<linux/gpio.h>)
#include <linux/gpio.h>
#endif
#if __has_include(<linux/of_gpio.h>)
#include <linux/of_gpio.h>
#endif
#if __has_include(<linux/interconnect.h>)
#include <linux/interconnect.h>
#endif
#if __has_include(<linux/clk-provider.h>)
#include <linux/clk-provider.h>
#endif

#include <linux/errno.h>
#include <linux/printk.h>
#include <linux/proc_fs.h>
#include <linux/seq_file.h>

#include "nv-p2p.h"
#include "standin-build.h"	/* generated: STANDIN_CC_VERSION, STANDIN_BUILD_DATE */

#ifndef STANDIN_NV_VERSION
#error "STANDIN_NV_VERSION is not set: build with the Makefile in this folder"
#endif
#ifndef STANDIN_NV_LICENSE
#error "STANDIN_NV_LICENSE is not set: build with the Makefile in this folder"
#endif

#if defined(CONFIG_X86_64)
#define STANDIN_ARCH "x86_64"
#elif defined(CONFIG_ARM64)
#define STANDIN_ARCH "aarch64"
#elif defined(CONFIG_PPC64)
#define STANDIN_ARCH "ppc64le"
#else
#define STANDIN_ARCH "unknown"
#endif

/* Same shape as the real driver's id string, with "(standin)" as builder. */
#if STANDIN_NV_OPEN
#define STANDIN_NVRM_ID "NVIDIA UNIX Open Kernel Module for " STANDIN_ARCH
#else
#define STANDIN_NVRM_ID "NVIDIA UNIX " STANDIN_ARCH " Kernel Module"
#endif

/*
 * The open driver exports nvidia_p2p_* GPL-only, the proprietary one does
 * not; keep that difference, it decides which gdrdrv builds can load.
 */
#if STANDIN_NV_OPEN
#define STANDIN_EXPORT(sym) EXPORT_SYMBOL_GPL(sym)
#else
#define STANDIN_EXPORT(sym) EXPORT_SYMBOL(sym)
#endif

/* Log once per call site, at debug level, that there is no GPU behind us. */
#define standin_no_gpu() \
	printk_once(KERN_DEBUG "nvidia: stand-in: %s: no GPU, failing\n", __func__)

int nvidia_p2p_init_mapping(uint64_t p2p_token,
			    struct nvidia_p2p_params *params,
			    void (*destroy_callback)(void *data),
			    void *data)
{
	standin_no_gpu();
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_init_mapping);

int nvidia_p2p_destroy_mapping(uint64_t p2p_token)
{
	standin_no_gpu();
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_destroy_mapping);

int nvidia_p2p_get_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address, uint64_t length,
			 struct nvidia_p2p_page_table **page_table,
			 void (*free_callback)(void *data), void *data)
{
	standin_no_gpu();
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_get_pages);

int nvidia_p2p_get_pages_persistent(uint64_t virtual_address,
				    uint64_t length,
				    struct nvidia_p2p_page_table **page_table,
				    uint32_t flags)
{
	standin_no_gpu();
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_get_pages_persistent);

/*
 * This module never hands out a page table or a DMA mapping, so whatever a
 * caller gives back cannot be ours: refuse it without touching it.  NULL is
 * accepted by the free functions, like kfree(NULL).
 */
int nvidia_p2p_put_pages(uint64_t p2p_token, uint32_t va_space,
			 uint64_t virtual_address,
			 struct nvidia_p2p_page_table *page_table)
{
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_put_pages);

int nvidia_p2p_put_pages_persistent(uint64_t virtual_address,
				    struct nvidia_p2p_page_table *page_table,
				    uint32_t flags)
{
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_put_pages_persistent);

int nvidia_p2p_free_page_table(struct nvidia_p2p_page_table *page_table)
{
	return page_table ? -EINVAL : 0;
}
STANDIN_EXPORT(nvidia_p2p_free_page_table);

int nvidia_p2p_dma_map_pages(struct pci_dev *peer,
			     struct nvidia_p2p_page_table *page_table,
			     struct nvidia_p2p_dma_mapping **dma_mapping)
{
	standin_no_gpu();
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_dma_map_pages);

int nvidia_p2p_dma_unmap_pages(struct pci_dev *peer,
			       struct nvidia_p2p_page_table *page_table,
			       struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return -EINVAL;
}
STANDIN_EXPORT(nvidia_p2p_dma_unmap_pages);

int nvidia_p2p_free_dma_mapping(struct nvidia_p2p_dma_mapping *dma_mapping)
{
	return dma_mapping ? -EINVAL : 0;
}
STANDIN_EXPORT(nvidia_p2p_free_dma_mapping);

/* No GPU means no rsync work: accept a well-formed driver, remember nothing. */
int nvidia_p2p_register_rsync_driver(nvidia_p2p_rsync_driver_t *driver,
				     void *data)
{
	if (!driver || !NVIDIA_P2P_RSYNC_DRIVER_VERSION_COMPATIBLE(driver))
		return -EINVAL;
	return 0;
}
STANDIN_EXPORT(nvidia_p2p_register_rsync_driver);

void nvidia_p2p_unregister_rsync_driver(nvidia_p2p_rsync_driver_t *driver,
					void *data)
{
}
STANDIN_EXPORT(nvidia_p2p_unregister_rsync_driver);

int nvidia_p2p_get_rsync_registers(nvidia_p2p_rsync_reg_info_t **reg_info)
{
	standin_no_gpu();
	return -ENODEV;
}
STANDIN_EXPORT(nvidia_p2p_get_rsync_registers);

void nvidia_p2p_put_rsync_registers(nvidia_p2p_rsync_reg_info_t *reg_info)
{
}
STANDIN_EXPORT(nvidia_p2p_put_rsync_registers);

/* /proc/driver/nvidia/version, in the real driver's two-line format. */
static struct proc_dir_entry *standin_proc_dir;

static int standin_version_show(struct seq_file *s, void *v)
{
	seq_printf(s, "NVRM version: %s  %s  Release Build  (standin)  %s\n",
		   STANDIN_NVRM_ID, STANDIN_NV_VERSION, STANDIN_BUILD_DATE);
	seq_printf(s, "GCC version:  %s\n", STANDIN_CC_VERSION);
	return 0;
}

static int __init standin_nvidia_init(void)
{
	standin_proc_dir = proc_mkdir("driver/nvidia", NULL);
	if (!standin_proc_dir)
		return -ENOMEM;
	if (!proc_create_single("version", 0444, standin_proc_dir,
				standin_version_show)) {
		proc_remove(standin_proc_dir);
		return -ENOMEM;
	}
	pr_info("nvidia: test-only stand-in %s loaded (no GPU support)\n",
		STANDIN_NV_VERSION);
	return 0;
}

static void __exit standin_nvidia_exit(void)
{
	proc_remove(standin_proc_dir);	/* removes "version" with it */
}

module_init(standin_nvidia_init);
module_exit(standin_nvidia_exit);

MODULE_DESCRIPTION("TEST-ONLY stand-in for the NVIDIA driver: exports nvidia_p2p_* without any GPU support");
MODULE_AUTHOR("gdrcopy-ansible contributors");
MODULE_VERSION(STANDIN_NV_VERSION);
MODULE_LICENSE(STANDIN_NV_LICENSE);
