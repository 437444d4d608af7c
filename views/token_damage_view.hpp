// Damage by frequency (issue 39): per frequency bucket of the evaluation text
// (how often a token is a scored target: 0 | 1 | 2-3 | 4-7 | ...), the mean KL
// where a bucket's token is predicted (bars, left axis) and the mean rebuild
// cosine of its rows (points, right axis), for one or two compressed runs side
// by side (pca against lle at the same bytes). Fed the engine's bucket summary
// (token_damage.hpp) as plain numbers; exports as a figure and as CSV.
#pragma once

#include <QPointF>
#include <QString>
#include <QStringList>
#include <QVector>

#include "plot_view.hpp"

class QCPBars;
class QCPGraph;
class QLabel;

namespace embedlab::views {

struct TokenDamageRun {
    QString name;                 // "pca rank 13"
    QVector<double> tokens;       // per bucket: vocabulary tokens in it
    QVector<double> positions;    // scored positions whose target is in it
    QVector<double> kl_as_target; // mean KL there (NaN: no position)
    QVector<double> kl_as_input;  // mean KL right after reading one (NaN: none)
    QVector<double> cosine;       // mean rebuild cosine of its rows
    double kl_mean = 0;           // over all scored positions
};

struct TokenDamageData {
    QString label;                // the original model
    QStringList buckets;          // "0", "1", "2-3", ... (the longest run's)
    QVector<TokenDamageRun> runs; // one or two
};

class TokenDamageView : public DataPlotView<TokenDamageData> {
    Q_OBJECT
public:
    explicit TokenDamageView(QWidget* parent = nullptr);
    QCPBars* klBars(int run) const;       // null when no such run
    QCPGraph* cosineGraph(int run) const; // null when no such run
    QString summary() const;              // what the read-out under the plot says
    QString hoverText(const QPointF& pixel) const;
    // bucket,run,tokens,positions,mean_cosine,kl_as_target,kl_as_input, one line per
    // bucket and run (empty KL where a bucket has no position). "" or the problem.
    QString exportCsv(const QString& file) const;
    // The same columns, as File > Export data writes them.
    QVector<DataTable> dataTables() const override;

private:
    void draw() override;
    void exportCsvInteractively();

    QVector<QCPBars*> bars_;
    QVector<QCPGraph*> cosines_;
    QLabel* stats_;
};

} // namespace embedlab::views
