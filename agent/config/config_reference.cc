// SPDX-License-Identifier: Apache-2.0
#include "agent/config/config_reference.h"

#include <algorithm>
#include <iterator>
#include <set>
#include <sstream>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_checks.h"
#include "agent/config/config_keys.h"
#include "agent/config/config_messages.h"

namespace headroom::agent {

namespace {

constexpr std::string_view kTool = "headroom-config-reference";
constexpr std::string_view kKeysRegion = "keys";
constexpr std::size_t kTomlWidth = 78;

std::string header_of(const SectionRow& s) {
  return s.repeated ? "[[" + std::string(s.name) + "]]" : "[" + std::string(s.name) + "]";
}

std::string type_name(const KeyRow& row) {
  switch (row.type) {
    case KeyType::duration: return "duration";
    case KeyType::string: return "string";
    case KeyType::boolean: return "boolean";
    case KeyType::integer: return "integer";
    case KeyType::number: return "number";
    case KeyType::array: return "array of strings";
    case KeyType::table: return "table";
    case KeyType::tables: return "array of tables";
    case KeyType::any:  // the setter takes several types: a word, or a number as well
      return row.expected.find_first_of("0123456789") == std::string_view::npos ? "string" : "string or integer";
  }
  return "";
}

std::vector<const KeyRow*> rows_of(std::string_view section) {
  std::vector<const KeyRow*> out;
  for (const KeyRow& r : config_key_rows())
    if (r.section == section) out.push_back(&r);
  return out;
}

// A Markdown link [text](target) starting at md[i]: where its text ends (the
// "]") and where the link ends (the ")"); brackets may nest in the text.
std::optional<std::pair<std::size_t, std::size_t>> link_at(std::string_view md, std::size_t i) {
  int depth = 0;
  for (std::size_t j = i; j < md.size(); ++j) {
    if (md[j] == '[') ++depth;
    if (md[j] == ']' && --depth == 0) {
      if (j + 1 >= md.size() || md[j + 1] != '(') return std::nullopt;
      const auto end = md.find(')', j);
      if (end == std::string_view::npos) return std::nullopt;
      return std::pair(j, end);
    }
  }
  return std::nullopt;
}

// The doc's Markdown as plain text: `x` -> x, [text](link) -> text.
std::string plain(std::string_view md) {
  std::string out;
  bool code = false;
  for (std::size_t i = 0; i < md.size(); ++i) {
    const char c = md[i];
    if (c == '`') {
      code = !code;
      continue;
    }
    if (c == '[' && !code) {
      if (auto link = link_at(md, i)) {
        out += plain(md.substr(i + 1, link->first - i - 1));
        i = link->second;
        continue;
      }
    }
    out += c;
  }
  return out;
}

// troff text: backslashes escaped, hyphens in code as \-, `x` in bold,
// links as their text, no line starting with a control character.
std::string troff(std::string_view md) {
  std::string out;
  bool code = false;
  for (std::size_t i = 0; i < md.size(); ++i) {
    const char c = md[i];
    if (c == '`') {
      out += code ? "\\fR" : "\\fB";
      code = !code;
    } else if (c == '\\') {
      out += "\\e";
    } else if (c == '-' && code) {
      out += "\\-";
    } else if (auto link = c == '[' && !code ? link_at(md, i) : std::nullopt) {
      out += troff(md.substr(i + 1, link->first - i - 1));
      i = link->second;
    } else if (md.substr(i).starts_with("\u00d7")) {
      out += "\\(mu";
      i += std::string_view("\u00d7").size() - 1;
    } else {
      out += c;
    }
  }
  if (out.starts_with('.') || out.starts_with('\'')) out.insert(0, "\\&");
  return out;
}

// A table cell of plain text: quoted words as code, the rest escaped.
std::string cell(std::string_view text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (const auto close = text.find('"', i + 1); c == '"' && close != std::string_view::npos) {
      out += "`" + std::string(text.substr(i, close - i + 1)) + "`";
      i = close;
    } else if (c == '|') {
      out += "\\|";
    } else if (c == '<') {
      out += "&lt;";
    } else if (c == '>') {
      out += "&gt;";
    } else {
      out += c;
    }
  }
  return out;
}

// `text` as comment lines of at most kTomlWidth columns, each starting with `prefix`.
std::string wrapped(std::string_view text, std::string_view prefix) {
  std::istringstream words{std::string(text)};
  std::string out, line, word;
  while (words >> word) {
    if (!line.empty() && prefix.size() + line.size() + 1 + word.size() > kTomlWidth) {
      out += std::string(prefix) + line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  if (!line.empty()) out += std::string(prefix) + line + "\n";
  return out;
}

std::string markdown(const SectionRow& section) {
  std::string out = "| Key | Type | Default | Allowed | Meaning |\n|---|---|---|---|---|\n";
  for (const KeyRow* r : rows_of(section.name)) {
    std::string def = r->default_value.empty() ? "none" : "`" + r->default_value + "`";
    if (!r->required.empty()) def = "\u2014 (**required**)";
    out += "| `" + std::string(r->key) + "` | " + type_name(*r) + " | " + def + " | " + cell(r->allowed) + " | " +
           std::string(r->doc) + " |\n";
  }
  if (section.repeated)
    out += "\nAt most " + std::to_string(section.max_entries) + " `" + header_of(section) + "` entries" +
           (section.within.empty() ? "" : " per `[[" + std::string(section.within) + "]]`") + ".\n";
  return out;
}

std::string man(const SectionRow& section) {
  std::string out;
  if (section.repeated)
    out += "At most " + std::to_string(section.max_entries) + " entries" +
           (section.within.empty() ? "" : " per [[" + std::string(section.within) + "]]") + ".\n";
  for (const KeyRow* r : rows_of(section.name)) {
    std::string facts = type_name(*r);
    if (!r->required.empty()) facts += ", required";
    else if (!r->default_value.empty()) facts += ", default " + r->default_value;
    if (!r->allowed.empty()) facts += "; " + r->allowed;
    out += ".TP\n.B " + std::string(r->key) + "\n(" + troff(facts) + ")\n.br\n" + troff(r->doc) + "\n";
  }
  return out;
}

std::string toml(const SectionRow& section) {
  const std::string_view note = section.repeated ? "## " : "# ";
  std::string out = section.repeated ? "# " + header_of(section) + "\n" : "";
  std::vector<const KeyRow*> tables;
  for (const KeyRow* r : rows_of(section.name)) {
    if (r->type == KeyType::table) {
      tables.push_back(r);
      continue;
    }
    if (r->type == KeyType::tables) {  // its entries are the nested section's, in a region of their own
      out += wrapped(plain(r->doc), note) + wrapped("Allowed: " + r->allowed + ".", note);
      continue;
    }
    out += wrapped(plain(r->doc), note);
    if (!r->allowed.empty()) out += wrapped("Allowed: " + r->allowed + ".", note);
    if (!r->required.empty()) out += wrapped("Required: " + std::string(r->required) + ".", note);
    const std::string value = r->default_value.empty() ? std::string(r->example) : r->default_value;
    out += (section.repeated ? "# " : "") + std::string(r->key) + " = " + value + "\n";
    if (!section.repeated) out += "\n";
  }
  // A table key ends the section: the keys after its header are its own.
  for (const KeyRow* r : tables) {
    const std::string name = std::string(section.name) + "." + std::string(r->key);
    out += wrapped(plain(r->doc), note) + wrapped("Allowed: " + r->allowed + ".", note);
    out += "[" + name + "]\n";
    for (std::string_view k : keys_in(name)) out += key_part(k) + " = 1.0\n";
    out += "\n";
  }
  if (section.repeated) out += "\n";
  return out;
}

// A libFuzzer dictionary entry.
std::string dict_entry(std::string_view word) {
  std::string out = "\"";
  for (char c : word) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// The quoted words of a text: "\"auto\", \"off\"" -> "auto", "off" (quotes kept).
void quoted_words(std::string_view text, std::set<std::string>& into) {
  for (auto open = text.find('"'); open != std::string_view::npos;) {
    const auto close = text.find('"', open + 1);
    if (close == std::string_view::npos) break;
    if (close > open + 1) into.insert(std::string(text.substr(open, close - open + 1)));
    open = text.find('"', close + 1);
  }
}

std::string dict() {
  std::set<std::string> words;
  for (const SectionRow& s : config_sections()) words.insert(header_of(s));
  for (std::string_view t : plain_tables())
    if (t.find('.') != std::string_view::npos) words.insert("[" + std::string(t) + "]");
  for (const KeyRow& r : config_key_rows()) {
    words.insert(std::string(r.key));
    quoted_words(r.allowed, words);
    quoted_words(r.default_value, words);
    quoted_words(r.example, words);
    quoted_words(r.expected, words);
  }
  for (std::string_view v : envoy_value_names()) words.insert(quote(v));
  for (std::string_view s : kNodeSignals) {
    words.insert(std::string(s));
    words.insert(quote(s));
  }
  std::string out;
  for (const std::string& w : words) out += dict_entry(w) + "\n";
  return out;
}

struct Markers {
  std::string_view begin_prefix, end_prefix, suffix;
};

Markers markers(ReferenceFormat format) {
  switch (format) {
    case ReferenceFormat::markdown:
      return {"<!-- generated by headroom-config-reference: ", "<!-- end of generated ", " -->"};
    case ReferenceFormat::man: return {".\\\" generated by headroom-config-reference: ", ".\\\" end of generated ", ""};
    case ReferenceFormat::toml:
    case ReferenceFormat::dict: return {"# generated by headroom-config-reference: ", "# end of generated ", ""};
  }
  return {};
}

// The region a line opens, if it is a begin marker.
std::optional<std::string_view> opens(std::string_view line, const Markers& m) {
  if (!line.starts_with(m.begin_prefix) || !line.ends_with(m.suffix)) return std::nullopt;
  return line.substr(m.begin_prefix.size(), line.size() - m.begin_prefix.size() - m.suffix.size());
}

}  // namespace

std::optional<ReferenceFormat> parse_reference_format(std::string_view name) {
  if (name == "markdown") return ReferenceFormat::markdown;
  if (name == "man") return ReferenceFormat::man;
  if (name == "toml") return ReferenceFormat::toml;
  if (name == "dict") return ReferenceFormat::dict;
  return std::nullopt;
}

std::optional<ReferenceFormat> reference_format_of(std::string_view path) {
  if (path.ends_with(".md")) return ReferenceFormat::markdown;
  if (path.ends_with(".5")) return ReferenceFormat::man;
  if (path.ends_with(".toml")) return ReferenceFormat::toml;
  if (path.ends_with(".dict")) return ReferenceFormat::dict;
  return std::nullopt;
}

Result<std::string> reference(ReferenceFormat format, std::string_view region) {
  if (region == kKeysRegion) {
    if (format == ReferenceFormat::dict) return dict();
    return logic_error("region \"keys\" is the dictionary's; a " + std::string(kTool) +
                       " region of this format names a section");
  }
  const SectionRow* section = find_section(region);
  if (section == nullptr) {
    std::vector<std::string_view> names;
    for (const SectionRow& s : config_sections()) names.push_back(s.name);
    names.push_back(kKeysRegion);
    return logic_error("unknown region " + quote(region) + "; regions are " + join(names));
  }
  switch (format) {
    case ReferenceFormat::markdown: return markdown(*section);
    case ReferenceFormat::man: return man(*section);
    case ReferenceFormat::toml: return toml(*section);
    case ReferenceFormat::dict: return dict();
  }
  return logic_error("unknown format");
}

Result<std::string> regenerate(std::string_view text, ReferenceFormat format, const std::string& file) {
  const Markers m = markers(format);
  const auto at = [&](int line, std::string message) {
    Error e = logic_error(std::move(message));
    e.file = file;
    e.line = line;
    e.column = 1;
    return e;
  };
  std::string out;
  int regions = 0;
  int number = 0;
  std::size_t pos = 0;
  std::optional<std::string> open;  // the region being skipped
  int opened_at = 0;
  while (pos < text.size()) {
    auto nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++number;
    if (open) {
      if (line != std::string(m.end_prefix) + *open + std::string(m.suffix)) continue;
      auto generated = reference(format, *open);
      if (!generated) return at(opened_at, generated.error().message);
      out += *generated;
      out += std::string(line) + "\n";
      open.reset();
      continue;
    }
    out += std::string(line) + "\n";
    if (auto region = opens(line, m)) {
      open = std::string(*region);
      opened_at = number;
      ++regions;
    }
  }
  if (open) return at(opened_at, "region " + quote(*open) + " has no end marker (" + std::string(m.end_prefix) + *open +
                                     std::string(m.suffix) + ")");
  if (regions == 0) return at(0, "no region generated by " + std::string(kTool) + " (" + std::string(m.begin_prefix) +
                                     "SECTION" + std::string(m.suffix) + ")");
  return out;
}

}  // namespace headroom::agent
