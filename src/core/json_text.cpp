#include "core/json_text.h"

#include <iterator>
#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include "core/host_memory.h"
#include "stepgraph/core.h"

namespace sg {

namespace {

// A char iterator that publishes how far the parser has read, so SAX events (which carry no
// position) can say where they happened.
struct CountingIterator {
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  const char* p = nullptr;
  const char** read = nullptr;

  reference operator*() const { return *p; }
  CountingIterator& operator++() {
    *read = ++p;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& o) const { return p == o.p; }
  bool operator!=(const CountingIterator& o) const { return p != o.p; }
};

std::string line_column(const std::string& text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, col = 1;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') ++line, col = 1;
    else ++col;
  }
  return cat("line ", line, ", column ", col);
}

// Builds the value like nlohmann's DOM parser, and refuses what nlohmann would accept silently.
template <class J>
class StrictSax {
 public:
  using number_integer_t = typename J::number_integer_t;
  using number_unsigned_t = typename J::number_unsigned_t;
  using number_float_t = typename J::number_float_t;
  using string_t = typename J::string_t;
  using binary_t = typename J::binary_t;

  StrictSax(const std::string& text, const char* const* read, const JsonLimits& limits)
      : text_(text), read_(read), limits_(limits) {}

  bool null() { return put(J(nullptr)); }
  bool boolean(bool v) { return put(J(v)); }
  bool number_integer(number_integer_t v) { return put(J(v)); }
  bool number_unsigned(number_unsigned_t v) { return put(J(v)); }
  bool number_float(number_float_t v, const string_t&) { return put(J(v)); }
  bool string(string_t& v) { return put(J(std::move(v))); }
  bool binary(binary_t& v) { return put(J::binary(std::move(v))); }
  bool start_object(std::size_t) { return open(J::object()); }
  bool start_array(std::size_t) { return open(J::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(string_t& k) {
    Frame& f = frames_.back();
    f.key = k;
    auto [it, fresh] = f.keys.emplace(k, key_start(here()));
    if (!fresh)
      return fail(cat("the key '", k, "' appears more than once (first at ", line_column(text_, it->second), ")"),
                  key_start(here()));
    return true;
  }

  bool parse_error(std::size_t position, const std::string& token, const nlohmann::detail::exception& e) {
    // nlohmann counts the characters read, the culprit included; a number is located at its start.
    if (e.id == 406)
      return fail(cat("the number ", token, " is out of range (beyond a double's)"),
                  position >= token.size() ? position - token.size() : 0);
    position = last_read(position);
    std::string msg = e.what();
    const size_t syntax = msg.find("syntax error");
    const size_t tag_end = msg.find("] ");
    if (syntax != std::string::npos) {
      msg = msg.substr(syntax);
    } else if (tag_end != std::string::npos) {
      msg = msg.substr(tag_end + 2);
    }
    return fail(msg, position, true);
  }

  J take() { return std::move(root_); }
  // The first refusal: where (line, column and path) and what, to follow the source's name.
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    J* value;
    std::string key;                    // objects: the key being read
    std::map<std::string, size_t> keys;  // objects: keys seen, with their offsets
  };

  // The offset of the last character read: the one that completed the current event.
  size_t here() const { return last_read(static_cast<size_t>(*read_ - text_.data())); }
  // The opening quote of the key whose closing quote is at `close` (skipping escaped quotes).
  size_t key_start(size_t close) const {
    for (size_t j = close; j-- > 0;) {
      if (text_[j] != '"') continue;
      size_t backslashes = 0;
      while (backslashes < j && text_[j - 1 - backslashes] == '\\') ++backslashes;
      if (backslashes % 2 == 0) return j;
    }
    return close;
  }
  static size_t last_read(size_t count) { return count > 0 ? count - 1 : 0; }

  // The path of the value being read, model.layers[2].units, shortened in the middle when deep.
  std::string path() const {
    std::string p = full_path();
    if (p.size() > 120) p = p.substr(0, 60) + "..." + p.substr(p.size() - 40);
    return p;
  }
  std::string full_path() const {
    std::string p;
    for (size_t i = 0; i < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      const bool child_open = i + 1 < frames_.size();  // then it is the container's last element
      if (f.value->is_object()) {
        if (!f.keys.empty()) p += (p.empty() ? "" : ".") + f.key;
      } else {
        p += cat("[", f.value->size() - (child_open ? 1 : 0), "]");
      }
    }
    return p;
  }

  bool fail(const std::string& what, size_t offset, bool syntax = false) {
    if (error_.empty()) {
      const std::string p = path();
      error_ = cat(syntax ? " is not valid JSON: " : ": ", line_column(text_, offset), p.empty() ? "" : " (" + p + ")",
                   ": ", what);
    }
    return false;
  }

  // Places a value where the parser is; returns it (a container stays open until its end).
  J* place(J&& v) {
    if (frames_.empty()) {
      root_ = std::move(v);
      return &root_;
    }
    J& parent = *frames_.back().value;
    if (parent.is_array()) {
      parent.push_back(std::move(v));
      return &parent.back();
    }
    // The key is new (duplicates were refused in key()): append without a lookup, which is
    // linear in an ordered_json object.
    auto& object = parent.template get_ref<typename J::object_t&>();
    if constexpr (std::is_same_v<J, nlohmann::ordered_json>) {
      object.emplace_back(frames_.back().key, std::move(v));
      return &object.back().second;
    } else {
      return &object.emplace_hint(object.end(), frames_.back().key, std::move(v))->second;
    }
  }
  bool put(J&& v) {
    place(std::move(v));
    return true;
  }
  bool open(J&& container) {
    if (frames_.size() >= limits_.max_depth)
      return fail(cat("nested more than ", limits_.max_depth, " levels deep"), here());
    J* v = place(std::move(container));
    frames_.push_back(Frame{v, {}, {}});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return true;
  }

  const std::string& text_;
  const char* const* read_;
  const JsonLimits& limits_;
  J root_;
  std::vector<Frame> frames_;
  std::string error_;
};

}  // namespace

template <class BasicJson>
BasicJson parse_json_text(const std::string& text, const std::string& what, const JsonLimits& limits) {
  SG_REQUIRE(text.size() <= limits.max_bytes, what, " is ", human_bytes(text.size()), "; at most ",
             human_bytes(limits.max_bytes), " of JSON are accepted");
  // nlohmann ends the input at a NUL byte, accepting whatever follows; JSON text never has one.
  const size_t nul = text.find('\0');
  SG_REQUIRE(nul == std::string::npos, what, " is not valid JSON: a NUL byte at offset ", nul, " (",
             line_column(text, nul), ")");
  // Said here, not by nlohmann, whose message for it changed in 3.11.3.
  SG_REQUIRE(text.find_first_not_of(" \t\r\n") != std::string::npos, what, " is not valid JSON: ",
             line_column(text, text.size()), ": syntax error: unexpected end of input (the text is empty)");
  const char* read = text.data();
  StrictSax<BasicJson> sax(text, &read, limits);
  const CountingIterator first{text.data(), &read}, last{text.data() + text.size(), &read};
  if (!BasicJson::sax_parse(first, last, &sax)) throw Error(what + sax.error());
  return sax.take();
}

template nlohmann::json parse_json_text<nlohmann::json>(const std::string&, const std::string&, const JsonLimits&);
template nlohmann::ordered_json parse_json_text<nlohmann::ordered_json>(const std::string&, const std::string&,
                                                                        const JsonLimits&);

}  // namespace sg
