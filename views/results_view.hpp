// Every finished compression job as a sortable table row, and a Pareto plot of
// compression ratio against delta ln PPL with one series per method and, behind
// them, the Pareto front over all methods as a dashed staircase. Clicking a
// point selects its row (and selecting a row rings its point). The rows are
// given by the app; the view only lays them out.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

#include "embedlab/results.hpp"

class QCustomPlot;
class QCPCurve;
class QCPGraph;
class QLabel;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace embedlab::views {

// A row is the engine's RunSummary (embedlab/results.hpp), which also owns the
// results files and the Pareto front: the view lays rows out, nothing more.
using ResultRow = embedlab::RunSummary;

class ResultsView : public QWidget {
    Q_OBJECT
public:
    explicit ResultsView(QWidget* parent = nullptr);
    int addRow(const ResultRow& row); // returns its index (in order of addition)
    void clear();
    const std::vector<ResultRow>& rows() const { return rows_; }
    int selectedRow() const { return selected_; } // -1: none
    QTableView* table() const { return table_; }
    QCustomPlot* plot() const { return plot_; }
    // The series of `method` in the plot (null if none); point i is the method's i-th row.
    QCPCurve* series(const QString& method) const;
    // The "Pareto front" staircase (empty without rows); point i is row front()[i].
    QCPGraph* frontSeries() const { return front_; }
    const std::vector<int>& front() const { return front_rows_; }

public slots:
    void selectRow(int row); // -1 clears
    // What a click on point `index` of `curve` does.
    void pointClicked(QCPCurve* curve, int index);

signals:
    void rowSelected(int row);

private:
    void rebuildPlot();

    QTableView* table_;
    QStandardItemModel* model_;
    QSortFilterProxyModel* proxy_;
    QCustomPlot* plot_;
    QCPCurve* ring_;  // marks the selected point
    QCPGraph* front_; // the Pareto front, drawn behind the method series
    std::vector<ResultRow> rows_;
    QVector<QString> methods_;          // one series each, in order of first appearance
    QVector<QVector<int>> method_rows_; // rows per series
    std::vector<int> front_rows_;
    int selected_ = -1;
};

} // namespace embedlab::views
