// Package report writes lab results for people and tools: Gradescope's
// results.json, JUnit XML, and a self-contained HTML page with each step's
// timeline drawn as SVG. It reads results only (package result), so the
// graders and a judge that carries no harness write the same reports.
package report
