//===- ReportIsa.cpp - --report: AMDGCN key loops and PTX directives ------===//
//
// Reads assembly text as the LLVM backends print it: the AMDGCN of an AMD
// code object (--emit=asm of the same module) and the PTX that is the
// NVIDIA code object.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <algorithm>
#include <cstring>

using namespace mla::report;
using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;

namespace {

//===----------------------------------------------------------------------===//
// AMDGCN
//===----------------------------------------------------------------------===//

/// One line of a function: a label or an instruction (directives, comments
/// and blank lines are dropped).
struct AsmLine {
  int64_t line = 0;
  /// The label a line `name:` defines; empty for an instruction.
  StringRef label;
  StringRef mnemonic, operands;
  /// PTX: the instruction has a guard predicate (`@%p bra`: conditional).
  bool predicated = false;
};

/// The assembly a function is written in: how its branches end blocks.
enum class Syntax { Amdgcn, Ptx };

/// The numbered lines of `text` (from `firstLine`) that `read(text, line)`
/// keeps: it fills in the label or the instruction and says whether the
/// line is one.
SmallVector<AsmLine>
readLines(StringRef text, int64_t firstLine,
          llvm::function_ref<bool(StringRef, AsmLine &)> read) {
  SmallVector<AsmLine> lines;
  SmallVector<StringRef> raw;
  text.split(raw, '\n');
  for (auto [i, t] : llvm::enumerate(raw)) {
    AsmLine line;
    line.line = firstLine + static_cast<int64_t>(i);
    if (read(t, line))
      lines.push_back(line);
  }
  return lines;
}

/// An instruction's mnemonic and operands (without a trailing `;`), where
/// `code` starts with a lower-case letter; false for anything else.
bool readInstruction(StringRef code, AsmLine &line) {
  if (code.empty() || !llvm::isLower(code[0]))
    return false;
  line.mnemonic = code.split(' ').first.split('\t').first;
  line.operands =
      code.drop_front(line.mnemonic.size()).trim().rtrim(';').trim();
  return true;
}

/// The lines of an AMDGCN function: labels (`.LBB1_3:` at column 0) and
/// instructions; directives, comments (`;`) and blank lines are dropped.
SmallVector<AsmLine> parseFunction(StringRef function, int64_t firstLine) {
  return readLines(function, firstLine, [](StringRef text, AsmLine &line) {
    StringRef code = text.split(';').first.rtrim();
    bool indented = !code.empty() && (code[0] == ' ' || code[0] == '\t');
    code = code.trim();
    if (!indented && code.ends_with(":")) {
      line.label = code.drop_back();
      return true;
    }
    return !code.starts_with(".") && readInstruction(code, line);
  });
}

/// The bits of the first `_b<N>`, `_u<N>` or `_i<N>` field of `suffix`
/// (`_b64_tr_b16` -> 64, `2st64_b32` -> 32), 0 when there is none.
int64_t fieldBits(StringRef suffix) {
  for (size_t i = 0; i + 2 < suffix.size(); ++i) {
    if (suffix[i] != '_' || !StringRef("bui").contains(suffix[i + 1]) ||
        !llvm::isDigit(suffix[i + 2]))
      continue;
    StringRef digits = suffix.drop_front(i + 2);
    digits = digits.take_while(llvm::isDigit);
    int64_t bits = 0;
    if (!digits.getAsInteger(10, bits))
      return bits;
  }
  return 0;
}

/// Bytes per lane of an LDS access `ds_read<suffix>` / `ds_write<suffix>`:
/// the element width, twice for the two-address forms (read2, write2st64).
int64_t ldsBytes(StringRef suffix) {
  int64_t bytes = fieldBits(suffix) / 8;
  return suffix.starts_with("2") ? 2 * bytes : bytes;
}

/// Bytes per lane of `buffer_load_<suffix>`; 0 for the format loads.
int64_t bufferLoadBytes(StringRef suffix) {
  if (suffix.consume_front("dword")) {
    if (suffix.consume_front("x")) {
      int64_t n = 0;
      if (suffix.take_while(llvm::isDigit).getAsInteger(10, n))
        return 0;
      return 4 * n;
    }
    return 4;
  }
  if (suffix.starts_with("ubyte") || suffix.starts_with("sbyte"))
    return 1;
  if (suffix.starts_with("ushort") || suffix.starts_with("sshort") ||
      suffix.starts_with("short"))
    return 2;
  return 0;
}

void countLine(const AsmLine &line, IsaCounts &c) {
  StringRef m = line.mnemonic;
  ++c.instructions;
  if (m.starts_with("v_mfma_") || m.starts_with("v_smfmac_")) {
    ++c.mfma;
  } else if (m.starts_with("buffer_load_")) {
    ++c.bufferLoads;
    c.bufferLoadBytes += bufferLoadBytes(m.drop_front(strlen("buffer_load_")));
  } else if (m.starts_with("ds_read")) {
    ++c.ldsReads;
    c.ldsReadBytes += ldsBytes(m.drop_front(strlen("ds_read")));
  } else if (m.starts_with("ds_write")) {
    ++c.ldsWrites;
    c.ldsWriteBytes += ldsBytes(m.drop_front(strlen("ds_write")));
  } else if (m == "s_barrier") {
    ++c.barriers;
  } else if (m.starts_with("s_waitcnt")) {
    ++c.waitcnt;
    if (line.operands.contains("vmcnt(0)"))
      ++c.waitVmcntZero;
  }
}

bool isBranch(const AsmLine &line, Syntax s) {
  if (s == Syntax::Ptx)
    return line.mnemonic == "bra" || line.mnemonic == "bra.uni";
  return line.mnemonic == "s_branch" || line.mnemonic.starts_with("s_cbranch_");
}

/// A branch that always jumps (no fall-through).
bool isUnconditional(const AsmLine &line, Syntax s) {
  return s == Syntax::Ptx ? !line.predicated : line.mnemonic == "s_branch";
}

/// Ends a wave's (thread's) path: nothing follows it.
bool isEnd(const AsmLine &line, Syntax s) {
  if (s == Syntax::Ptx)
    return line.mnemonic == "ret" || line.mnemonic == "exit" ||
           line.mnemonic.starts_with("trap");
  return line.mnemonic.starts_with("s_endpgm") ||
         line.mnemonic == "s_setpc_b64";
}

/// A basic block: lines [begin, end) of the function.
struct Block {
  size_t begin = 0, end = 0;
  SmallVector<size_t, 2> succs, preds;
};

/// The function's control-flow graph: a block starts at each label and
/// after each branch; a block's successors are its branch's target and,
/// unless it ends in an unconditional branch or an end (s_branch,
/// s_endpgm; PTX: bra without a predicate, ret), the next block.
SmallVector<Block> buildBlocks(ArrayRef<AsmLine> lines, Syntax syntax) {
  SmallVector<Block> blocks;
  llvm::StringMap<size_t> byLabel;
  for (size_t i = 0; i < lines.size(); ++i) {
    bool startsBlock = blocks.empty() || !lines[i].label.empty() ||
                       isBranch(lines[i - 1], syntax) ||
                       isEnd(lines[i - 1], syntax);
    if (startsBlock)
      blocks.push_back({i, i, {}, {}});
    blocks.back().end = i + 1;
    if (!lines[i].label.empty())
      byLabel[lines[i].label] = blocks.size() - 1;
  }
  for (size_t b = 0; b < blocks.size(); ++b) {
    const AsmLine &last = lines[blocks[b].end - 1];
    bool next = b + 1 < blocks.size();
    if (isBranch(last, syntax)) {
      StringRef target = last.operands.split(',').first.trim();
      auto it = byLabel.find(target);
      if (it != byLabel.end())
        blocks[b].succs.push_back(it->second);
      next = next && !isUnconditional(last, syntax);
    } else if (isEnd(last, syntax)) {
      next = false;
    }
    if (next && !llvm::is_contained(blocks[b].succs, b + 1))
      blocks[b].succs.push_back(b + 1);
    for (size_t succ : blocks[b].succs)
      blocks[succ].preds.push_back(b);
  }
  return blocks;
}

/// dominators[b]: the blocks every path from the entry to b passes (empty
/// for an unreachable block).
std::vector<llvm::BitVector> dominators(ArrayRef<Block> blocks) {
  size_t n = blocks.size();
  llvm::BitVector reachable(n);
  SmallVector<size_t> work = {0};
  reachable.set(0);
  while (!work.empty()) {
    size_t b = work.pop_back_val();
    for (size_t s : blocks[b].succs)
      if (!reachable.test(s)) {
        reachable.set(s);
        work.push_back(s);
      }
  }
  std::vector<llvm::BitVector> dom(n, llvm::BitVector(n, true));
  dom[0] = llvm::BitVector(n);
  dom[0].set(0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t b = 1; b < n; ++b) {
      if (!reachable.test(b))
        continue;
      llvm::BitVector d(n, true);
      for (size_t p : blocks[b].preds)
        if (reachable.test(p))
          d &= dom[p];
      d.set(b);
      if (d != dom[b]) {
        dom[b] = std::move(d);
        changed = true;
      }
    }
  }
  for (size_t b = 0; b < n; ++b)
    if (!reachable.test(b))
      dom[b].reset();
  return dom;
}

/// The natural loops: for each header h, h and every block that reaches a
/// back edge u -> h (h dominates u) without passing h.
SmallVector<std::pair<size_t, llvm::BitVector>>
naturalLoops(ArrayRef<Block> blocks) {
  std::vector<llvm::BitVector> dom = dominators(blocks);
  SmallVector<std::pair<size_t, llvm::BitVector>> loops;
  for (size_t u = 0; u < blocks.size(); ++u)
    for (size_t h : blocks[u].succs) {
      if (!dom[u].test(h))
        continue;
      auto *loop = llvm::find_if(loops, [&](auto &l) { return l.first == h; });
      if (loop == loops.end()) {
        loops.push_back({h, llvm::BitVector(blocks.size())});
        loop = &loops.back();
        loop->second.set(h);
      }
      SmallVector<size_t> work = {u};
      while (!work.empty()) {
        size_t b = work.pop_back_val();
        if (loop->second.test(b))
          continue;
        loop->second.set(b);
        llvm::append_range(work, blocks[b].preds);
      }
    }
  return loops;
}

/// The fewest and the most of `weight[b]` summed over the paths through
/// `body` from `header` to a block that branches back to it; none where
/// the body without those back edges has a cycle (an inner loop).
std::optional<PathRange> iterationPaths(ArrayRef<Block> blocks, size_t header,
                                        const llvm::BitVector &body,
                                        ArrayRef<int64_t> weight) {
  // Depth-first post-order from the header; a block met again while on
  // the stack closes a cycle.
  SmallVector<size_t> order;
  llvm::BitVector done(blocks.size()), onStack(blocks.size());
  SmallVector<std::pair<size_t, size_t>> stack = {{header, 0}};
  onStack.set(header);
  while (!stack.empty()) {
    auto &[b, next] = stack.back();
    if (next < blocks[b].succs.size()) {
      size_t s = blocks[b].succs[next++];
      if (s == header || !body.test(s) || done.test(s))
        continue;
      if (onStack.test(s))
        return std::nullopt;
      onStack.set(s);
      stack.push_back({s, 0});
      continue;
    }
    onStack.reset(b);
    done.set(b);
    order.push_back(b);
    stack.pop_back();
  }
  const int64_t none = -1;
  SmallVector<int64_t> lo(blocks.size(), none), hi(blocks.size(), none);
  lo[header] = hi[header] = weight[header];
  std::optional<PathRange> range;
  for (size_t b : llvm::reverse(order)) {
    if (lo[b] == none)
      continue;
    for (size_t s : blocks[b].succs) {
      if (s == header) {
        if (!range)
          range = PathRange{lo[b], hi[b]};
        range->shortest = std::min(range->shortest, lo[b]);
        range->longest = std::max(range->longest, hi[b]);
        continue;
      }
      if (!body.test(s))
        continue;
      lo[s] = lo[s] == none ? lo[b] + weight[s]
                            : std::min(lo[s], lo[b] + weight[s]);
      hi[s] = std::max(hi[s], hi[b] + weight[s]);
    }
  }
  return range;
}

/// The loop of `header` and `body`: its label, lines, counts
/// (`count(line, counts)` for each instruction) and one iteration's paths.
template <typename Loop, typename Count>
Loop describeLoop(ArrayRef<AsmLine> lines, ArrayRef<Block> blocks,
                  size_t header, const llvm::BitVector &body, Count count) {
  Loop loop;
  loop.label = lines[blocks[header].begin].label.str();
  loop.firstLine = lines[blocks[header].begin].line;
  loop.lastLine = loop.firstLine;
  SmallVector<int64_t> weight(blocks.size(), 0);
  for (size_t b : body.set_bits()) {
    loop.firstLine = std::min(loop.firstLine, lines[blocks[b].begin].line);
    loop.lastLine = std::max(loop.lastLine, lines[blocks[b].end - 1].line);
    int64_t before = loop.counts.instructions;
    for (size_t i = blocks[b].begin; i < blocks[b].end; ++i)
      if (lines[i].label.empty())
        count(lines[i], loop.counts);
    weight[b] = loop.counts.instructions - before;
  }
  loop.paths = iterationPaths(blocks, header, body, weight);
  return loop;
}

/// Every natural loop of `lines` (`natural`: header and blocks of each),
/// described in the same order.
template <typename Loop, typename Count>
SmallVector<Loop> describeLoops(
    ArrayRef<AsmLine> lines, Syntax syntax, Count count,
    llvm::SmallVectorImpl<std::pair<size_t, llvm::BitVector>> &natural) {
  SmallVector<Block> blocks = buildBlocks(lines, syntax);
  natural.assign(naturalLoops(blocks));
  SmallVector<Loop> loops;
  for (const auto &[header, body] : natural)
    loops.push_back(describeLoop<Loop>(lines, blocks, header, body, count));
  return loops;
}

/// The key loop among `loops`: the one with the most matrix instructions
/// (`matrix(counts)`), the innermost of equals (the fewest instructions:
/// the matrix instructions are all in it); when no loop has any (f32), the
/// KV stream, the most copies (`copies(counts)`), the outermost of equals
/// (an inner loop holding all of them is the tile's copy). `anyMatrix`
/// says which rule chose.
template <typename Loop, typename Matrix, typename Copies>
size_t chooseKeyLoop(ArrayRef<Loop> loops, Matrix matrix, Copies copies,
                     bool &anyMatrix) {
  anyMatrix =
      llvm::any_of(loops, [&](const Loop &l) { return matrix(l.counts) > 0; });
  auto weight = [&](const Loop &l) {
    return anyMatrix ? matrix(l.counts) : copies(l.counts);
  };
  auto better = [&](const Loop &x, const Loop &y) {
    if (weight(x) != weight(y))
      return weight(x) > weight(y);
    return anyMatrix ? x.counts.instructions < y.counts.instructions
                     : x.counts.instructions > y.counts.instructions;
  };
  size_t best = 0;
  for (size_t i = 1; i < loops.size(); ++i)
    if (better(loops[i], loops[best]))
      best = i;
  return best;
}

/// PTX instructions by kind (PtxCounts).
void countPtxLine(const AsmLine &line, PtxCounts &c) {
  StringRef m = line.mnemonic;
  ++c.instructions;
  if (m.starts_with("wgmma.mma_async"))
    ++c.wgmma;
  else if (m.starts_with("mma.sync"))
    ++c.mma;
  else if (m.starts_with("cp.async.wait") || m.starts_with("wgmma.wait"))
    ++c.waits;
  else if (m.starts_with("cp.async.") && !m.starts_with("cp.async.commit"))
    ++c.cpAsync;
  else if (m.starts_with("ld.global"))
    ++c.ldGlobal;
  else if (m.starts_with("st.global"))
    ++c.stGlobal;
  else if (m.starts_with("ld.shared") || m.starts_with("ldmatrix"))
    ++c.ldShared;
  else if (m.starts_with("st.shared"))
    ++c.stShared;
  else if (m.starts_with("bar.sync") || m.starts_with("barrier.sync"))
    ++c.barriers;
}

/// The lines of a PTX function body (`{` ... `}`): labels (`$L__BB1_3:`)
/// and instructions, a guard predicate (`@%p1`, `@!%p1`) noted and
/// dropped; directives, braces and comments are dropped.
SmallVector<AsmLine> parsePtxFunction(StringRef body, int64_t firstLine) {
  return readLines(body, firstLine, [](StringRef text, AsmLine &line) {
    StringRef code = text.split("//").first.trim();
    if (code.ends_with(":") && !code.contains(' ')) {
      line.label = code.drop_back();
      return true;
    }
    if (code.consume_front("@")) {
      line.predicated = true;
      code = code.drop_until([](char ch) { return ch == ' ' || ch == '\t'; })
                 .trim();
    }
    return readInstruction(code, line);
  });
}

//===----------------------------------------------------------------------===//
// PTX
//===----------------------------------------------------------------------===//

/// Where `.entry kernel` is in a PTX text: its `.entry` line, the first
/// line of its body (a `{` at column 0) and the end of the line that
/// closes it, where the braces balance again (inline asm blocks and
/// operand lists open and close their own, some at column 0).
struct PtxEntry {
  size_t entry = 0, body = 0, end = 0;
};

std::optional<PtxEntry> ptxEntry(StringRef ptx, StringRef kernel) {
  PtxEntry e;
  e.entry = ptx.find((".entry " + kernel + "(").str());
  if (e.entry == StringRef::npos)
    return std::nullopt;
  e.body = ptx.find("\n{", e.entry);
  if (e.body == StringRef::npos)
    return std::nullopt;
  ++e.body;
  int depth = 0;
  e.end = e.body;
  while (e.end < ptx.size()) {
    size_t eol = ptx.find('\n', e.end);
    StringRef code = ptx.slice(e.end, eol).split("//").first;
    depth +=
        static_cast<int>(code.count('{')) - static_cast<int>(code.count('}'));
    e.end = eol == StringRef::npos ? ptx.size() : eol + 1;
    if (depth <= 0)
      break;
  }
  return e;
}

/// The integers of a directive's operands: `.maxntid 64, 1, 1`.
SmallVector<int64_t> directiveValues(StringRef text, StringRef directive) {
  SmallVector<int64_t> values;
  size_t at = text.find(directive);
  while (at != StringRef::npos) {
    // Whole-word match: `.maxntid` but not `.maxntidx`.
    char next = at + directive.size() < text.size()
                    ? text[at + directive.size()]
                    : '\n';
    if (next == ' ' || next == '\t')
      break;
    at = text.find(directive, at + 1);
  }
  if (at == StringRef::npos)
    return values;
  StringRef rest = text.drop_front(at + directive.size());
  rest = rest.take_until([](char c) { return c == '\n'; });
  SmallVector<StringRef> items;
  rest.split(items, ',');
  for (StringRef item : items) {
    int64_t v = 0;
    if (item.trim().getAsInteger(10, v))
      break;
    values.push_back(v);
  }
  return values;
}

/// The bytes of a `.shared` variable declaration (`.shared .align 4 .b8
/// name[256];`), its name in `name`; 0 for the `.extern` dynamic array.
int64_t sharedDeclBytes(StringRef decl, StringRef &name) {
  if (decl.contains(".extern"))
    return 0;
  SmallVector<StringRef> tokens;
  llvm::SplitString(decl, tokens, " \t");
  int64_t element = 0;
  for (StringRef token : tokens) {
    token = token.trim();
    if (token.size() > 2 && token[0] == '.' &&
        StringRef("busf").contains(token[1])) {
      int64_t bits = 0;
      if (!token.drop_front(2).getAsInteger(10, bits))
        element = bits / 8;
      continue;
    }
    if (!element || token.starts_with("."))
      continue;
    name = token.take_until([](char c) { return c == '[' || c == ';'; });
    int64_t bytes = element;
    for (StringRef dims = token.drop_front(name.size());
         dims.consume_front("[");) {
      int64_t n = 0;
      StringRef digits = dims.take_until([](char c) { return c == ']'; });
      if (digits.getAsInteger(10, n))
        return 0;
      bytes *= n;
      dims = dims.drop_front(digits.size() + 1);
    }
    return bytes;
  }
  return 0;
}

} // namespace

llvm::Expected<StringRef> mla::report::amdgcnFunction(StringRef assembly,
                                                      StringRef kernel) {
  std::string start = (kernel + ":\n").str();
  size_t begin = assembly.starts_with(start) ? 0 : assembly.find("\n" + start);
  if (begin == StringRef::npos)
    return llvm::createStringError("the AMDGCN assembly has no function '" +
                                   kernel + "'");
  if (begin)
    ++begin;
  size_t end = assembly.find("\n.Lfunc_end", begin);
  if (end == StringRef::npos)
    return llvm::createStringError("the AMDGCN function '" + kernel +
                                   "' has no .Lfunc_end");
  return assembly.slice(begin, end);
}

std::optional<KeyLoop> mla::report::findKeyLoop(StringRef function,
                                                int64_t firstLine) {
  SmallVector<AsmLine> lines = parseFunction(function, firstLine);
  if (lines.empty())
    return std::nullopt;
  SmallVector<std::pair<size_t, llvm::BitVector>> natural;
  SmallVector<IsaLoop> loops =
      describeLoops<IsaLoop>(lines, Syntax::Amdgcn, countLine, natural);
  if (loops.empty())
    return std::nullopt;
  bool anyMfma = false;
  size_t best = chooseKeyLoop<IsaLoop>(
      loops, [](const IsaCounts &c) { return c.mfma; },
      [](const IsaCounts &c) { return c.bufferLoads; }, anyMfma);
  KeyLoop key{loops[best], anyMfma ? "mfma" : "buffer_loads", {}};
  const llvm::BitVector &body = natural[best].second;
  for (size_t i = 0; i < loops.size(); ++i)
    if (i != best && body.test(natural[i].first))
      key.inner.push_back(loops[i]);
  return key;
}

llvm::Expected<PtxKernel> mla::report::readPtxKernel(StringRef ptx,
                                                     StringRef kernel) {
  std::optional<PtxEntry> e = ptxEntry(ptx, kernel);
  if (!e)
    return llvm::createStringError("the PTX has no .entry " + kernel);
  size_t begin = e->entry, end = e->end;
  StringRef body = ptx.slice(begin, end);
  PtxKernel k;
  auto triple = [&](StringRef directive,
                    std::optional<std::array<int64_t, 3>> &out) {
    SmallVector<int64_t> v = directiveValues(body, directive);
    if (!v.empty())
      out = std::array<int64_t, 3>{v[0], v.size() > 1 ? v[1] : 1,
                                   v.size() > 2 ? v[2] : 1};
  };
  triple(".maxntid", k.maxntid);
  triple(".reqntid", k.reqntid);
  if (SmallVector<int64_t> v = directiveValues(body, ".maxnreg"); !v.empty())
    k.maxnreg = v[0];
  if (SmallVector<int64_t> v = directiveValues(body, ".minnctapersm");
      !v.empty())
    k.minnctapersm = v[0];
  // Static shared variables: those declared in the body, and those
  // declared at module scope (brace depth 0) that the body names.
  SmallVector<StringRef> lines;
  ptx.split(lines, '\n');
  size_t offset = 0;
  int depth = 0;
  for (StringRef line : lines) {
    size_t at = offset;
    offset += line.size() + 1;
    StringRef code = line.split("//").first.trim();
    int scope = depth;
    depth +=
        static_cast<int>(code.count('{')) - static_cast<int>(code.count('}'));
    if (!code.starts_with(".shared") && !code.contains(" .shared "))
      continue;
    StringRef name;
    int64_t bytes = sharedDeclBytes(code, name);
    bool inBody = at >= begin && at < end;
    if (bytes && (inBody || (scope == 0 && body.contains(name))))
      k.staticShared += bytes;
  }
  return k;
}

std::optional<PtxLoop> mla::report::findPtxKeyLoop(StringRef ptx,
                                                   StringRef kernel) {
  std::optional<PtxEntry> e = ptxEntry(ptx, kernel);
  if (!e)
    return std::nullopt;
  size_t begin = e->body, end = e->end;
  int64_t firstLine =
      static_cast<int64_t>(ptx.take_front(begin).count('\n')) + 1;
  SmallVector<AsmLine> lines =
      parsePtxFunction(ptx.slice(begin, end), firstLine);
  SmallVector<std::pair<size_t, llvm::BitVector>> natural;
  SmallVector<PtxLoop> loops =
      describeLoops<PtxLoop>(lines, Syntax::Ptx, countPtxLine, natural);
  if (loops.empty())
    return std::nullopt;
  bool anyMma = false;
  size_t best = chooseKeyLoop<PtxLoop>(
      loops, [](const PtxCounts &c) { return c.mma + c.wgmma; },
      [](const PtxCounts &c) { return c.cpAsync + c.ldGlobal; }, anyMma);
  PtxLoop key = loops[best];
  key.chosenBy = anyMma ? "mma" : "copies";
  for (size_t i = 0; i < loops.size(); ++i)
    if (i != best && natural[best].second.test(natural[i].first))
      key.inner.push_back({loops[i].label, loops[i].counts});
  return key;
}
