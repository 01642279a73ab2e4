#pragma once
// A well-formedness check of XML, as far as sluice's SVG pictures need it, for the tests that make pictures.
#include <cstddef>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::test {

// Checks XML well-formedness as far as these pictures need: one root, properly nested and closed tags,
// quoted attributes, and character data with no raw '<' or stray '&'. Returns the empty string when
// well-formed, else what is wrong.
inline std::string xml_problem(std::string_view xml) {
  std::vector<std::string> open;
  bool root_closed = false;
  std::size_t i = 0;
  const std::regex attributes(R"(^(\s+[A-Za-z_:][-\w:.]*="[^"<&]*(&(amp|lt|gt|quot|apos);[^"<&]*)*")*\s*/?$)");
  while (i < xml.size()) {
    if (xml[i] == '<') {
      const std::size_t end = xml.find('>', i);
      if (end == std::string_view::npos) return "unterminated tag";
      std::string_view tag = xml.substr(i + 1, end - i - 1);
      i = end + 1;
      if (tag.starts_with('/')) {
        if (open.empty() || open.back() != tag.substr(1)) return "mismatched </" + std::string(tag.substr(1)) + ">";
        open.pop_back();
        if (open.empty()) root_closed = true;
        continue;
      }
      if (root_closed) return "content after the root element";
      const std::size_t name_end = tag.find_first_of(" \t\n/");
      const std::string name(tag.substr(0, name_end));
      if (name.empty()) return "empty tag name";
      const std::string rest(name_end == std::string_view::npos ? "" : tag.substr(name_end));
      if (!std::regex_match(rest, attributes)) return "bad attributes in <" + name + ">";
      if (!tag.ends_with('/')) open.push_back(name);
    } else {
      if (xml[i] == '&') {
        const std::size_t semicolon = xml.find(';', i);
        if (semicolon == std::string_view::npos) return "unterminated entity";
        const std::string_view entity = xml.substr(i, semicolon - i + 1);
        if (entity != "&amp;" && entity != "&lt;" && entity != "&gt;" && entity != "&quot;" && entity != "&apos;")
          return "unknown entity " + std::string(entity);
      } else if (open.empty() && xml[i] != '\n' && !root_closed) {
        return "text outside the root element";
      }
      ++i;
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + ">";
  if (!root_closed) return "no root element";
  return "";
}

// The first <text> of an SVG picture whose extent, estimated as io::detail::text_width does, leaves the
// picture's [0, width]; empty when every text fits. Vertical (rotated) texts are skipped.
inline std::string text_outside(const std::string& svg) {
  const std::regex picture(R"re(<svg [^>]*width="([0-9.]+)")re");
  std::smatch size;
  if (!std::regex_search(svg, size, picture)) return "no width";
  const double width = std::stod(size[1]);
  const std::regex text(
      R"re(<text x="([-0-9.]+)" y="[-0-9.]+" font-size="(\d+)" text-anchor="(\w+)"([^>]*)>([^<]*)</text>)re");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), text); it != std::sregex_iterator(); ++it) {
    const std::smatch& match = *it;
    if (match[4].str().find("rotate") != std::string::npos) continue;
    const double x = std::stod(match[1]);
    const std::string content = std::regex_replace(match[5].str(), std::regex("&\\w+;"), "&");  // one character each
    const double extent = 0.6 * std::stod(match[2]) * static_cast<double>(content.size());
    const std::string anchor = match[3];
    const double begin = anchor == "start" ? x : anchor == "middle" ? x - extent / 2 : x - extent;
    if (begin < -0.01 || begin + extent > width + 0.01) return match[5];
  }
  return "";
}

inline std::size_t count(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string_view::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

}  // namespace sluice::test
