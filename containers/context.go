// Package containers plays snacklab's crash-after-receipt scenario (lab step
// 8) across Docker containers. This file lays out the build context of the
// runtime image on the host: static binaries and the Dockerfile, so that the
// image is FROM scratch and nothing is ever pulled. The dockertest suite in
// this directory builds it; containers/play.sh lays out the same context for
// compose.yaml.
package containers

import (
	"bytes"
	"context"
	"debug/elf"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Dockerfile is the runtime image's Dockerfile (containers/Dockerfile).
//
//go:embed Dockerfile
var Dockerfile []byte

// Binaries are the executables an implementation provides (CONTRACT.md), as
// they are named in the image's /usr/local/bin.
var Binaries = []string{"queuectl", "sender", "receiver"}

// Verifier is the name of the scenario verifier (containers/verify) in the
// image; it is always built from this module.
const Verifier = "verify"

// ContextOptions says where the binaries come from.
type ContextOptions struct {
	// ModuleDir is the snacklab module root. Empty: the module of the
	// working directory, as `go env GOMOD` reports it.
	ModuleDir string
	// BinDir, when set, holds an implementation's queuectl, sender and
	// receiver, which must be static Linux executables (the image has no
	// libc and no interpreter); they are copied in place of the reference
	// ones. Empty: the reference implementation is built.
	BinDir string
	// Log receives the go command's output; nil discards it (it is part of
	// any error anyway).
	Log io.Writer
}

// WriteContext lays out the image's build context in dir (which should be
// empty): Dockerfile, bin/ with the four executables, built with
// CGO_ENABLED=0, and root/ with the image's empty mount points.
func WriteContext(ctx context.Context, dir string, opt ContextOptions) error {
	modDir := opt.ModuleDir
	if modDir == "" {
		var err error
		if modDir, err = moduleDir(ctx); err != nil {
			return err
		}
	}
	bin := filepath.Join(dir, "bin")
	for _, d := range []string{bin, filepath.Join(dir, "root", "queue"), filepath.Join(dir, "root", "data"), filepath.Join(dir, "root", "tmp")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), Dockerfile, 0o644); err != nil {
		return err
	}

	pkgs := []string{"./containers/" + Verifier}
	if opt.BinDir == "" {
		for _, b := range Binaries {
			pkgs = append(pkgs, "./cmd/"+b)
		}
	}
	if err := goBuild(ctx, modDir, bin, pkgs, opt.Log); err != nil {
		return err
	}
	if opt.BinDir != "" {
		for _, b := range Binaries {
			if err := copyExecutable(filepath.Join(opt.BinDir, b), filepath.Join(bin, b)); err != nil {
				return err
			}
		}
	}
	for _, b := range append(append([]string(nil), Binaries...), Verifier) {
		if err := CheckStatic(filepath.Join(bin, b)); err != nil {
			return err
		}
	}
	return nil
}

// goBuild builds static Linux executables of pkgs into out.
func goBuild(ctx context.Context, modDir, out string, pkgs []string, log io.Writer) error {
	args := append([]string{"build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out + string(filepath.Separator)}, pkgs...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	if log != nil {
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, log), io.MultiWriter(&buf, log)
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, buf.String())
	}
	return nil
}

// moduleDir finds the root of the module of the working directory.
func moduleDir(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the snacklab module: set ContextOptions.ModuleDir")
	}
	return filepath.Dir(mod), nil
}

func copyExecutable(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// CheckStatic reports why path cannot run in a FROM scratch image: it is
// not an ELF executable (a script needs an interpreter the image lacks) or
// it asks for a dynamic loader (the image has no libc).
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable, so it cannot run in the FROM scratch image: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 256))
			return fmt.Errorf("%s: dynamically linked (needs %s), but the image is FROM scratch: build it static (Go: CGO_ENABLED=0)",
				path, strings.TrimRight(string(interp), "\x00"))
		}
	}
	return nil
}
