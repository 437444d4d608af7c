// Every finished compression job as a sortable table row, and a Pareto plot of
// compression ratio against delta ln PPL with one series per method and, behind
// them, the Pareto front over all methods as a dashed staircase. Clicking a
// point selects its row (and selecting a row rings its point). The rows are
// given by the app; the view only lays them out. Deleting a row is undoable
// (undoStack(): Ctrl+Z in the window puts it back in its place, same cells).
#pragma once

#include <QHash>
#include <QPointF>
#include <QSet>
#include <QString>
#include <QStringList>
#include <QVector>
#include <QWidget>

#include "embedlab/results.hpp"
#include "plot_data_export.hpp"

class QCustomPlot;
class QCPCurve;
class QCPGraph;
class QLabel;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;
class QComboBox;
class QStandardItem;
class QUndoStack;

namespace embedlab::views {

class WindowDivergenceView;

// A row is the engine's RunSummary (embedlab/results.hpp), which also owns the
// results files and the Pareto front: the view lays rows out, nothing more.
using ResultRow = embedlab::RunSummary;

class ResultsView : public QWidget {
    Q_OBJECT
public:
    explicit ResultsView(QWidget* parent = nullptr);
    // Returns its index (in order of addition). The first run of a model on a text
    // also adds that model's "original" row to the table (not to rows()); a run with
    // the settings of an earlier one is marked "(repeat)".
    int addRow(const ResultRow& row);
    // Deletes run `row` (later rows' indices move down by one; rowRemoved says so),
    // as a command on undoStack(): undoing it puts the row back at `row` with the same
    // cells (later rows move up again; rowRestored says so). clear() forgets the stack.
    void removeRow(int row);
    QUndoStack* undoStack() const { return undo_; }
    // File > Export data: the Pareto plot's shown rows (row, method, parameters,
    // model, part, the x and y as plotted, the y as drawn on a symlog axis, whether on
    // its group's front), then the selected row's KL per window when shown.
    QVector<DataTable> dataTables() const;
    // The plot's y axis: "Δ ln PPL" (default), "KL (nats)", "1 − top-1 agreement",
    // "PPL", "1 − task accuracy" or "1 − mean cosine", linear or symlog (sign(y) log10(1 + |y| / 0.01));
    // fronts follow the metric. Until a scale is picked (here or in the box) it is symlog while the shown
    // values span two decades beyond 0.01 (one failed fit 50 nats off beside runs of 0.1), else linear.
    void setYAxis(const QString& metric, bool symlog);
    QString yMetric() const;
    bool ySymlog() const { return symlog(); }
    // The x axis: "bytes ratio" (the part's bytes as stored after / before: a quantised
    // table's values ratio is 1, its bytes ratio its bits over the input's) or
    // "parameter ratio" (stored values after / before). Until one is chosen (here or
    // in the box) the axis is bytes whenever a row has bytes, else parameters. Rows
    // without bytes (a mixed-dtype input, files written before bytes were recorded)
    // are left off the bytes axis, and its label says how many.
    void setXAxis(const QString& metric);
    // Methods drawn as baselines (the registry's bytes_baseline: the quantised table):
    // their points joined by a dashed line in order of x, so another method's front
    // is read against them at equal bytes.
    void setBaselineMethods(const QStringList& methods);
    // The line joining `method`'s points when it is a baseline (null otherwise).
    QCPGraph* baselineLine(const QString& method) const;
    // Why a model's PPL and Δ ln PPL cells read as they do (issue 61 item 6: an encoder's are
    // a pseudo-perplexity, or "–" because none applies), as their tooltip: on the rows shown
    // and on every later row of that model. "" removes it.
    void setPerplexityNote(const QString& model, const QString& note);
    QString perplexityNote(const QString& model) const { return perplexity_notes_.value(model); }
    static double symlogOf(double v);
    void clear();
    const std::vector<ResultRow>& rows() const { return rows_; }
    int selectedRow() const { return selected_; } // -1: none
    QTableView* table() const { return table_; }
    QCustomPlot* plot() const { return plot_; }
    // KL per evaluation window of the selected row (beside the Pareto plot; shown
    // while the selected row has per-window values).
    WindowDivergenceView* windowView() const { return windows_; }
    // The value under a pixel of the plot, shown as a tooltip on hover ("" if nothing).
    QString hoverText(const QPointF& pixel) const;
    // The series of `method` in the plot (null if none); point i is the method's i-th row.
    // With several models shown, each method has a series per model (in the method's
    // colour, the model's marker shape): this is its first model's.
    QCPCurve* series(const QString& method) const;
    // The "Pareto front" staircase of the first shown group (empty without rows);
    // point i is row front()[i]. Every shown group (model, compressed part,
    // evaluation text: rows that may be compared) has a staircase of its own.
    QCPGraph* frontSeries() const { return front_; }
    const std::vector<int>& front() const { return front_rows_; }
    const std::vector<embedlab::ParetoGroup>& shownGroups() const { return shown_groups_; }
    // Rows of one model only ("": every model). A row of a model not shown yet
    // switches the filter to that model, so a plot never mixes models unasked.
    void setModelFilter(const QString& model);
    QString modelFilter() const;
    QComboBox* modelFilterBox() const { return model_filter_; }

public slots:
    void selectRow(int row); // -1 clears
    // What a click on point `index` of `curve` does.
    void pointClicked(QCPCurve* curve, int index);

signals:
    void rowSelected(int row);
    void rowRemoved(int row);
    void rowRestored(int row);

private:
    void rebuildPlot();
    QString emptyText() const; // what the plot says with no point to draw ("": it has some)
    QList<QStandardItem*> rowItems(const ResultRow& r, int index) const;
    double metric(int row) const;  // the y metric of a run
    double xOf(int row) const;     // its x (the x axis' ratio; NaN: not drawn)
    double plotted(int row) const; // and where it is drawn (symlog applied)
    bool symlog() const;
    // removeRow's command: takes run `row` out (its table row held by `taken`) / puts it back.
    struct TakenRow;
    void takeRow(int row, TakenRow& taken);
    void restoreRow(int row, TakenRow& taken);

    QTableView* table_;
    QStandardItemModel* model_;
    QSortFilterProxyModel* proxy_;
    QCustomPlot* plot_;
    WindowDivergenceView* windows_;
    QCPCurve* ring_;                 // marks the selected point
    QCPGraph* front_;                // the first shown group's Pareto front, drawn behind the method series
    QVector<QCPGraph*> more_fronts_; // the other shown groups' fronts
    std::vector<embedlab::ParetoGroup> shown_groups_; // fronts_[0] = front_, then more_fronts_
    QComboBox* model_filter_;
    QComboBox* x_metric_;
    QComboBox* y_metric_;
    QComboBox* y_scale_;
    std::vector<ResultRow> rows_;
    bool x_chosen_ = false;       // the x axis was picked; else bytes when rows have them
    bool y_scale_chosen_ = false; // the y scale was picked; else symlog when the values span decades
    QStringList baseline_methods_;
    QHash<QString, QCPGraph*> baseline_lines_;
    QVector<QString> methods_;          // one series each, in order of first appearance
    QVector<QString> series_models_;    // and its model, with several models shown ("" otherwise)
    QVector<QCPCurve*> method_curves_;  // methods_[m]'s series
    QVector<QVector<int>> method_rows_; // rows per series
    std::vector<int> front_rows_;
    QSet<QString> baselines_;                  // model, part, text of the "original" rows shown
    QHash<QString, QString> perplexity_notes_; // by model: the PPL cells' tooltip
    int selected_ = -1;
    QUndoStack* undo_;
};

} // namespace embedlab::views
