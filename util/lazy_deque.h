// util/lazy_deque.h — a std::deque that allocates nothing until it first holds an element.
//
// libstdc++'s std::deque allocates its map and a 512-byte block when it is constructed,
// empty or not. A connection keeps six queues that are empty nearly all the time (NACKs,
// retransmissions, stream reports...): with thousands of connections (4,032 in
// bench/sim_bench's all-to-all) that is megabytes for nothing, and so are a stream's
// receive and answer queues on a stream that only sends. LazyDeque keeps the deque
// in a std::optional, made on the first push and kept from then on (clear keeps it, as
// std::deque's does). Only the operations its users need; an empty LazyDeque's iterators
// are value-initialised deque iterators, equal to each other.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>
#include <utility>

namespace mroce {

template <class T>
class LazyDeque {
  public:
    using iterator = typename std::deque<T>::iterator;
    using const_iterator = typename std::deque<T>::const_iterator;

    bool empty() const { return !q_ || q_->empty(); }
    size_t size() const { return q_ ? q_->size() : 0; }
    T& front() { return q_->front(); }
    const T& front() const { return q_->front(); }
    T& back() { return q_->back(); }
    const T& back() const { return q_->back(); }
    T& operator[](size_t i) { return (*q_)[i]; }
    const T& operator[](size_t i) const { return (*q_)[i]; }

    void push_back(const T& v) { made().push_back(v); }
    void push_back(T&& v) { made().push_back(std::move(v)); }
    template <class... Args>
    T& emplace_back(Args&&... args) {
        return made().emplace_back(std::forward<Args>(args)...);
    }
    void push_front(const T& v) { made().push_front(v); }
    void push_front(T&& v) { made().push_front(std::move(v)); }
    void pop_front() { q_->pop_front(); }
    void pop_back() { q_->pop_back(); }
    void clear() {
        if (q_) q_->clear();
    }
    iterator erase(const_iterator it) { return q_->erase(it); }

    iterator begin() { return q_ ? q_->begin() : iterator{}; }
    iterator end() { return q_ ? q_->end() : iterator{}; }
    const_iterator begin() const { return q_ ? q_->cbegin() : const_iterator{}; }
    const_iterator end() const { return q_ ? q_->cend() : const_iterator{}; }

  private:
    std::deque<T>& made() {
        if (!q_) q_.emplace();
        return *q_;
    }
    std::optional<std::deque<T>> q_;
};

}  // namespace mroce
