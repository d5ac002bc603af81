//go:build !unix

package main

import "syscall"

func childAttr() *syscall.SysProcAttr { return nil }

// stopWithParent does nothing here: only Linux has a parent-death signal.
func stopWithParent() {}
