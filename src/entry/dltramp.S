/* dltramp: the exported dlsym and dlvsym. Each asks its C router
 * (lookup.c) which function should answer, restores the arguments and
 * jumps there: glibc resolves RTLD_NEXT and RTLD_DEFAULT relative to the
 * caller's return address, which a call would replace. The return address
 * also goes along as one more argument (libc's functions ignore it).
 * cumemcap_dlsym_entry and cumemcap_dlvsym_entry are hidden names of the
 * same entry points, whatever the process binds dlsym and dlvsym to.
 *
 * Thread safety: no data of its own; the arguments stay on the calling
 * thread's stack across the router call. */

/* An exported entry point and its hidden alias, from here to entry_end. */
	.macro	entry name, alias
	.globl	\name
	.type	\name, %function
	.globl	\alias
	.hidden	\alias
	.type	\alias, %function
\name:
\alias:
	.endm
	.macro	entry_end name, alias
	.size	\name, .-\name
	.size	\alias, .-\alias
	.endm

	.text

#if defined(__x86_64__)

	entry	dlsym, cumemcap_dlsym_entry
	.cfi_startproc
	endbr64
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	call	cumemcap_dlsym_route
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	movq	(%rsp), %rdx
	jmp	*%rax
	.cfi_endproc
	entry_end	dlsym, cumemcap_dlsym_entry

	entry	dlvsym, cumemcap_dlvsym_entry
	.cfi_startproc
	endbr64
	pushq	%rdi
	.cfi_adjust_cfa_offset 8
	pushq	%rsi
	.cfi_adjust_cfa_offset 8
	pushq	%rdx
	.cfi_adjust_cfa_offset 8
	call	cumemcap_dlvsym_route
	popq	%rdx
	.cfi_adjust_cfa_offset -8
	popq	%rsi
	.cfi_adjust_cfa_offset -8
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	movq	(%rsp), %rcx
	jmp	*%rax
	.cfi_endproc
	entry_end	dlvsym, cumemcap_dlvsym_entry

#elif defined(__aarch64__)

	entry	dlsym, cumemcap_dlsym_entry
	.cfi_startproc
	stp	x29, x30, [sp, #-32]!
	.cfi_def_cfa_offset 32
	.cfi_offset 29, -32
	.cfi_offset 30, -24
	mov	x29, sp
	stp	x0, x1, [sp, #16]
	bl	cumemcap_dlsym_route
	mov	x16, x0
	ldp	x0, x1, [sp, #16]
	ldp	x29, x30, [sp], #32
	.cfi_def_cfa_offset 0
	mov	x2, x30
	br	x16
	.cfi_endproc
	entry_end	dlsym, cumemcap_dlsym_entry

	entry	dlvsym, cumemcap_dlvsym_entry
	.cfi_startproc
	stp	x29, x30, [sp, #-48]!
	.cfi_def_cfa_offset 48
	.cfi_offset 29, -48
	.cfi_offset 30, -40
	mov	x29, sp
	stp	x0, x1, [sp, #16]
	str	x2, [sp, #32]
	bl	cumemcap_dlvsym_route
	mov	x16, x0
	ldp	x0, x1, [sp, #16]
	ldr	x2, [sp, #32]
	ldp	x29, x30, [sp], #48
	.cfi_def_cfa_offset 0
	mov	x3, x30
	br	x16
	.cfi_endproc
	entry_end	dlvsym, cumemcap_dlvsym_entry

#else
#error "dltramp.S: add a trampoline for this architecture"
#endif

	.section .note.GNU-stack, "", %progbits
