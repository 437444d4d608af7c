// What each row of the Results table came from, kept in one record per row so that a
// deleted row, its undo and a reopened session move everything a row knows together.
//
//   ResultRows rows;
//   rows.at(3).request = request;                  // row 3 ran `request` (Copy as command)
//   rows.at(3).source = RowSource{model, request}; // ... here: its model can be exported
//   ResultRow taken = rows.take(1);                // row 1 deleted: rows 2, 3 are now 1, 2
//   rows.insert(1, std::move(taken));              // undone: back at 1, the others at 2, 3
//   if (const ResultRow* r = rows.find(2); r && r->exportable()) ...
//
// Indices are the results view's row indices; a row the window knows nothing of (a
// reopened row without a request) has an empty record, and rows past size() are empty.
// Thread safety: none (the GUI thread's).
#pragma once

#include <QString>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "embedlab/experiment_request.hpp"

namespace embedlab::app {

// A local run's model and request as run (its model and evaluation text filled in): what
// exporting the row fits again, or finds kept in memory.
struct RowSource {
    QString model;
    CompressionRequest request;
};

struct ResultRow {
    std::optional<RowSource> source;             // a run on this computer: exportable
    std::optional<CompressionRequest> request;   // any run's (local or remote): Copy as command
    std::optional<nlohmann::ordered_json> chain; // a chain's row: its pipeline request
    bool chain_exportable = false;               // the chain ran here: Export runs it again
    // Export compressed model applies: a local run, or a chain run here.
    bool exportable() const { return source || (chain && chain_exportable); }
};

class ResultRows {
public:
    // Row `row`'s record, made (empty, with any rows before it) when there is none.
    ResultRow& at(int row)
    {
        if (row >= size())
            rows_.resize(static_cast<size_t>(row) + 1);
        return rows_[static_cast<size_t>(row)];
    }
    // Row `row`'s record, or null when the window has none for it (or `row` < 0).
    const ResultRow* find(int row) const
    {
        return row >= 0 && row < size() ? &rows_[static_cast<size_t>(row)] : nullptr;
    }
    // Row `row` deleted: its record, the rows after it moved down by one.
    ResultRow take(int row)
    {
        if (row < 0 || row >= size())
            return {};
        ResultRow taken = std::move(rows_[static_cast<size_t>(row)]);
        rows_.erase(rows_.begin() + row);
        return taken;
    }
    // `record` put back as row `row`: the rows at and after it moved up by one.
    void insert(int row, ResultRow record)
    {
        if (row < 0)
            return;
        if (row > size())
            rows_.resize(static_cast<size_t>(row));
        rows_.insert(rows_.begin() + row, std::move(record));
    }
    void clear() { rows_.clear(); }
    int size() const { return static_cast<int>(rows_.size()); }

private:
    std::vector<ResultRow> rows_;
};

} // namespace embedlab::app
