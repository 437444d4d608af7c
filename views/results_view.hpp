// Every finished compression job as a sortable table row, and a Pareto plot of
// compression ratio against delta ln PPL with one series per method and, behind
// them, the Pareto front over all methods as a dashed staircase. Clicking a
// point selects its row (and selecting a row rings its point). The rows are
// given by the app; the view only lays them out and serialises them.
#pragma once

#include <QString>
#include <QVector>
#include <QWidget>

class QCustomPlot;
class QCPCurve;
class QCPGraph;
class QLabel;
class QSortFilterProxyModel;
class QStandardItemModel;
class QTableView;

namespace embedlab::views {

struct ResultRow {
    QString method;          // "pca", "svd", "tt", ...
    QString parameters;      // e.g. "rank 32"
    double params = 0;       // stored values after compression
    double ratio = 0;        // after / before
    double ppl = 0;          // compressed model
    double delta_ln_ppl = 0; // ln PPL compressed - ln PPL original
    double cosine = 0;       // mean row cosine to the original
    double seconds = 0;      // job wall time
    QString host;
};

// The rows no other row dominates (a row dominates another when its ratio and
// delta ln PPL are both no larger and one is smaller; lower is better for both),
// by ascending ratio, then delta ln PPL, then index. Exact duplicates are all on
// the front. Rows whose ratio, ppl or delta ln PPL is not finite are left out.
QVector<int> paretoFront(const QVector<ResultRow>& rows);

class ResultsView : public QWidget {
    Q_OBJECT
public:
    explicit ResultsView(QWidget* parent = nullptr);
    int addRow(const ResultRow& row); // returns its index (in order of addition)
    void clear();
    const QVector<ResultRow>& rows() const { return rows_; }
    int selectedRow() const { return selected_; } // -1: none
    QTableView* table() const { return table_; }
    QCustomPlot* plot() const { return plot_; }
    // The series of `method` in the plot (null if none); point i is the method's i-th row.
    QCPCurve* series(const QString& method) const;
    // The "Pareto front" staircase (empty without rows); point i is row front()[i].
    QCPGraph* frontSeries() const { return front_; }
    const QVector<int>& front() const { return front_rows_; }

    // Serialisations (all rows, in order of addition; numbers at full precision).
    QString toCsv() const;
    QByteArray toJson() const;
    static QVector<ResultRow> fromCsv(const QString& csv); // inverse of toCsv
    static QVector<ResultRow> fromJson(const QByteArray& json);

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
    QVector<ResultRow> rows_;
    QVector<QString> methods_;          // one series each, in order of first appearance
    QVector<QVector<int>> method_rows_; // rows per series
    QVector<int> front_rows_;
    int selected_ = -1;
};

} // namespace embedlab::views
