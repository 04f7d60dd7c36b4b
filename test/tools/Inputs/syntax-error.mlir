func.func @broken(%q: memref<?x1x16x576xbf16>) {
  mla.decode %q, %q
  return
}
